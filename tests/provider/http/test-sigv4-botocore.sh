#!/bin/sh
# Our SigV4 (src/provider/http/sigv4.c) against botocore's, the signer of the AWS
# CLI and boto3: the same EC2 requests (RunInstances with spot options,
# DescribeInstances with tag filters, TerminateInstances,
# DescribeSpotPriceHistory; POST bodies and GET query strings; with and
# without a session token; several regions and times; values with spaces,
# slashes, '+', '=', ':' and UTF-8) signed by both at the same fixed time
# must give the same body, X-Amz-Date, payload hash and Authorization
# header, byte for byte.  botocore takes its time from
# datetime.datetime.utcnow() inside botocore.auth (SigV4Auth.add_auth), so
# the script swaps that module's datetime for one whose utcnow() is fixed.
# Debian's python3-botocore is used (/usr/bin/python3: the python3 first on
# a developer's PATH may be a pyenv without it); without it the test is
# skipped.
. "${top_srcdir:-$(dirname "$0")/../../..}/tests/lib.sh"
SIGV4="$top_builddir/tests/provider/http/test-sigv4"
PY=/usr/bin/python3
if ! [ -x "$PY" ] || ! "$PY" -c 'import botocore.auth, botocore.awsrequest' 2>/dev/null; then
	echo "SKIP: botocore cannot be imported by $PY (Debian: python3-botocore)" >&2
	exit 77
fi
[ -x "$SIGV4" ] || fail "$SIGV4 is not built"
tmpdir

"$PY" - "$T/requests" "$T/expected" <<'PY' || fail "botocore could not sign the requests"
import calendar, datetime, sys, types
import botocore.auth
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode_sequence

class FixedTime(datetime.datetime):
    at = None

    @classmethod
    def utcnow(cls):
        return cls.at

botocore.auth.datetime = types.SimpleNamespace(datetime=FixedTime)

CT = "application/x-www-form-urlencoded; charset=utf-8"
AKID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+abc/def=="
V = [("Version", "2016-11-15")]

run_spot = [("Action", "RunInstances")] + V + [
    ("ImageId", "ami-0abcdef1234567890"), ("InstanceType", "g5.xlarge"),
    ("MinCount", "1"), ("MaxCount", "1"), ("ClientToken", "6f1c1b0e-3a2b-4c5d-9e8f-0123456789ab"),
    ("InstanceMarketOptions.MarketType", "spot"),
    ("InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time"),
    ("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate"),
    ("UserData", "IyEvYmluL3NoCmVjaG8gaGk+Pz8/Cg=="),
    ("NetworkInterface.1.DeviceIndex", "0"), ("NetworkInterface.1.SubnetId", "subnet-0123"),
    ("NetworkInterface.1.AssociatePublicIpAddress", "true"),
    ("MetadataOptions.HttpTokens", "required"),
    ("BlockDeviceMapping.1.DeviceName", "/dev/sda1"), ("BlockDeviceMapping.1.Ebs.VolumeSize", "100"),
    ("TagSpecification.1.ResourceType", "instance"),
    ("TagSpecification.1.Tag.1.Key", "spotdeck-run"), ("TagSpecification.1.Tag.1.Value", "run 1/été ☃"),
]
describe = [("Action", "DescribeInstances")] + V + [
    ("Filter.1.Name", "tag:spotdeck-run"), ("Filter.1.Value.1", "run1"),
    ("Filter.2.Name", "instance-state-name"), ("Filter.2.Value.1", "pending"), ("Filter.2.Value.2", "running"),
]
terminate = [("Action", "TerminateInstances")] + V + [
    ("InstanceId.1", "i-1234567890abcdef0"), ("InstanceId.2", "i-0598c7d356eba48d7")]
prices = [("Action", "DescribeSpotPriceHistory")] + V + [
    ("InstanceType.1", "g5.xlarge"), ("InstanceType.2", "p3.2xlarge"),
    ("ProductDescription.1", "Linux/UNIX"), ("StartTime", "2026-12-02T17:00:00.000Z"),
    ("AvailabilityZone", "us-east-1a")]

T1 = (2026, 12, 2, 17, 4, 51)
reqs = [
    # (method, host, path, region, time, token, query, headers, form)
    ("POST", "ec2.us-east-1.amazonaws.com", "/", "us-east-1", T1, None, [], [("Content-Type", CT)], run_spot),
    ("POST", "ec2.us-east-1.amazonaws.com", "/", "us-east-1", T1, TOKEN, [], [("Content-Type", CT)], run_spot),
    ("POST", "ec2.eu-west-1.amazonaws.com", "/", "eu-west-1", (2024, 2, 29, 23, 59, 59), None, [],
     [("Content-Type", CT)], run_spot + [("InstanceMarketOptions.SpotOptions.MaxPrice", "1.25")]),
    ("POST", "ec2.us-west-2.amazonaws.com", "/", "us-west-2", T1, None, [], [("Content-Type", CT)], describe),
    ("POST", "ec2.us-west-2.amazonaws.com", "/", "us-west-2", T1, TOKEN, [], [("Content-Type", CT)],
     describe + [("MaxResults", "1000"), ("NextToken", "eyJ2IjoiMiIsImMiOiJ+L2E9PSJ9+/=")]),
    ("GET", "ec2.us-west-2.amazonaws.com", "/", "us-west-2", T1, None, describe, [], []),
    ("GET", "ec2.ap-southeast-2.amazonaws.com", "/", "ap-southeast-2", T1, TOKEN, describe, [], []),
    ("POST", "ec2.ap-northeast-1.amazonaws.com", "/", "ap-northeast-1", (2030, 1, 1, 0, 0, 0), None, [],
     [("Content-Type", CT)], terminate),
    ("POST", "ec2.ap-northeast-1.amazonaws.com", "/", "ap-northeast-1", (2030, 1, 1, 0, 0, 0), TOKEN, [],
     [("Content-Type", CT)], terminate),
    ("POST", "ec2.sa-east-1.amazonaws.com", "/", "sa-east-1", T1, None, [], [("Content-Type", CT)], prices),
    ("GET", "ec2.eu-central-1.amazonaws.com", "/", "eu-central-1", (2040, 6, 30, 12, 0, 1), None, prices, [], []),
    ("GET", "ec2.cn-north-1.amazonaws.com.cn", "/", "cn-north-1", T1, TOKEN, prices, [], []),
    # Duplicate names, and names whose raw and encoded orders differ.
    ("GET", "ec2.us-gov-west-1.amazonaws.com", "/", "us-gov-west-1", T1, None,
     [("Action", "DescribeInstances"), ("k", "b"), ("k", "a b"), ("k", ""), ("aZ", "1"), ("aé", "2"),
      ("K", "x"), ("a~b", "~"), ("a b", "+/=:&?#")] + V, [], []),
    # UTF-8 of 2, 3 and 4 bytes in a tag value.
    ("POST", "ec2.us-east-1.amazonaws.com", "/", "us-east-1", T1, None, [], [("Content-Type", CT)],
     [("Action", "CreateTags")] + V + [("ResourceId.1", "i-1234567890abcdef0"),
      ("Tag.1.Key", "note"), ("Tag.1.Value", "ñ € 𝄞 Grüße/日本")]),
    # Header names in mixed case, values with blanks to trim and collapse.
    ("POST", "ec2.us-east-1.amazonaws.com", "/", "us-east-1", T1, TOKEN, [],
     [("CONTENT-TYPE", "  application/x-www-form-urlencoded;    charset=utf-8  "),
      ("X-Amz-Meta-Note", "a   b \t c"), ("x-spotdeck-run", "run1")], terminate),
    # A path (encoded once on the wire, once more in the canonical URI) and a port.
    ("GET", "localhost:4566", "/a%20b/c~d/", "us-east-1", T1, None, [("Action", "DescribeRegions")] + V, [], []),
    ("POST", "127.0.0.1:8080", "/ec2/", "us-east-1", T1, TOKEN, [], [("Content-Type", CT)], describe),
    # No headers but the signer's, an empty body, the epoch.
    ("GET", "ec2.us-east-1.amazonaws.com", "/", "us-east-1", (1970, 1, 1, 0, 0, 0), None, [], [], []),
    ("POST", "ec2.us-east-1.amazonaws.com", "/", "us-east-1", T1, None, [], [("Content-Type", CT)],
     [("Action", "DescribeRegions")] + V + [("AllRegions", "true"), ("DryRun", "")]),
    # A large body: 200 instance ids.
    ("POST", "ec2.us-east-2.amazonaws.com", "/", "us-east-2", T1, TOKEN, [], [("Content-Type", CT)],
     [("Action", "TerminateInstances")] + V + [("InstanceId.%d" % i, "i-%017x" % (i * 7919)) for i in range(1, 201)]),
]

with open(sys.argv[1], "w", encoding="utf-8") as d, open(sys.argv[2], "w", encoding="utf-8") as e:
    for method, host, path, region, when, token, query, headers, form in reqs:
        FixedTime.at = datetime.datetime(*when)
        body = percent_encode_sequence(form).encode("utf-8")
        scheme = "http" if ":" in host else "https"
        req = AWSRequest(method=method, url="%s://%s%s" % (scheme, host, path), headers=dict(headers),
                         data=body, params=query)
        signer = SigV4Auth(Credentials(AKID, SECRET, token), "ec2", region)
        signer.add_auth(req)
        for k, v in [("method", method), ("host", host), ("path", path), ("region", region),
                     ("service", "ec2"), ("time", str(calendar.timegm(when))), ("akid", AKID),
                     ("secret", SECRET)] + ([("token", token)] if token else []):
            d.write("%s\t%s\n" % (k, v))
        for kind, pairs in (("query", query), ("header", headers), ("form", form)):
            for k, v in pairs:
                d.write("%s\t%s\t%s\n" % (kind, k, v))
        d.write("sign\n")
        e.write("body: %s\nx-amz-date: %s\npayload: %s\nauthorization: %s\n\n" % (
            body.decode("utf-8"), req.headers["X-Amz-Date"], signer.payload(req), req.headers["Authorization"]))
print("%d requests signed by botocore" % len(reqs))
PY

"$SIGV4" --sign <"$T/requests" >"$T/got" || fail "test-sigv4 --sign failed"
if ! diff -u "$T/expected" "$T/got" >"$T/diff"; then
	cat "$T/diff" >&2
	fail "our SigV4 differs from botocore's (- botocore, + ours)"
fi
n=$(grep -c '^authorization: ' "$T/got")
[ "$n" -ge 20 ] || fail "only $n requests were compared"
ok "$n requests: body, X-Amz-Date, payload hash and Authorization equal botocore's"
