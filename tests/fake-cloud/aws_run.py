"""What the aws provider's end-to-end tests share (tests/provider/aws/test-aws-*.sh,
after tests/fake-cloud/ec2-vms.sh): the fake's control endpoints and the
job's provider object for it.  Imported with tests/ and tests/fake-cloud/
on sys.path."""
import os, pwd

from cloud_run import control

T, BASE = os.environ["T"], os.environ["BASE"]


def live():
    """The ids of the fake's instances not shutting down or terminated, sorted."""
    return sorted(i["id"] for i in control("/_control/state")["instances"]
                  if i["state"] not in ("shutting-down", "terminated"))


def provider(**more):
    """The job's provider object for the fake: us-east-1 and its three AZs,
    an AMI, the endpoint, our key pair and user, the instances' sshd port,
    this build's worker, a 1 s backstop and a 0.25 s boot poll; MORE added
    or replacing."""
    p = {"name": "aws", "region": "us-east-1", "zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
         "image": "ami-0123456789abcdef0", "instance_type": "g4dn.xlarge", "endpoint": BASE,
         "identity": T + "/id", "ssh_user": pwd.getpwuid(os.getuid()).pw_name, "ssh_port": 2222,
         "known_hosts": T + "/known_hosts", "worker": os.environ["WORKER"], "poll_s": 1,
         "boot_poll_s": 0.25, "boot_timeout_s": 60}
    p.update(more)
    return p
