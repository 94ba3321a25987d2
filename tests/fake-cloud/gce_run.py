"""What the gce provider's end-to-end tests share (tests/provider/gce/test-gce-*.sh,
after tests/fake-cloud/gce-vms.sh): the fake's control endpoints and the
job's provider object for it.  Imported with tests/ and tests/fake-cloud/
on sys.path."""
import os, pwd

from cloud_run import control

T, BASE = os.environ["T"], os.environ["BASE"]
ZONES = ["us-central1-a", "us-central1-b", "europe-west4-a"]


def live():
    """The names of the fake's VMs that are not TERMINATED, sorted."""
    return sorted(i["name"] for i in control("/_control/state")["instances"] if i["status"] != "TERMINATED")


def provider(**more):
    """The job's provider object for the fake: its project, zones, key,
    API and Billing Catalog roots, our key pair and user, the VMs' sshd port, this build's
    worker, a 1 s backstop; MORE added or replacing."""
    p = {"name": "gce", "project": "p1", "credentials": os.environ["KEY"], "zones": ZONES,
         "api_root": BASE + "/compute/v1", "billing_root": BASE + "/v1", "identity": T + "/id",
         "ssh_user": pwd.getpwuid(os.getuid()).pw_name, "ssh_port": 2222,
         "known_hosts": T + "/known_hosts", "worker": os.environ["WORKER"], "poll_s": 1}
    p.update(more)
    return p
