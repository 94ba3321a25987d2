# tests/fake-cloud/gce-env.sh - sourced by the tests that drive spotdeck's
# GCE code against tests/fake-cloud/gce.py (after tests/lib.sh and tmpdir):
# makes a service account's RSA key pair and key files, starts the fake for
# project p1 and zones us-central1-a, us-central1-b, europe-west4-a (SKUs
# from $T/prices.json), and sets
#   PY        /usr/bin/python3 (Debian's, with PyJWT and cryptography)
#   BASE      http://127.0.0.1:PORT, the fake
#   KEY       $T/key.json, the key file (mode 600) the fake accepts
#   WRONGKEY  $T/wrong.json, a well-formed key the fake refuses
# and points XDG_CACHE_HOME at $T/cache (the gce provider's prices cache).
# It exits 77 (SKIP) when PyJWT or cryptography cannot be imported.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" -c 'import jwt, cryptography' 2>/dev/null || {
	echo "SKIP: PyJWT or cryptography not importable by $PY" >&2; exit 77; }
"$PY" - "$T" <<'PY' || fail "key generation"
import os, sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
T = sys.argv[1]
for name in ("sa", "other"):
    k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()).decode()
    open(os.path.join(T, name + ".pem"), "w").write(pem)
    open(os.path.join(T, name + ".pub"), "wb").write(k.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
PY
# N1 and T4 Spot rates as Google prices them (USD per vCPU-hour, per
# GiB-hour, per GPU-hour), a T4 dearer in europe-west4.
[ -f "$T/prices.json" ] || printf '{"nvidia-tesla-t4": 0.14, "europe-west4/nvidia-tesla-t4": 0.16, "n1-core": 0.00698, "n1-ram": 0.000936}\n' >"$T/prices.json"
fake_start gce.py "$PY" "$top_srcdir/tests/fake-cloud/gce.py" --project p1 \
	--zones us-central1-a,us-central1-b,europe-west4-a --sa-email sd@p1.iam.gserviceaccount.com \
	--sa-public-key "$T/sa.pub" --prices "$T/prices.json" ${GCE_FAKE_ARGS:-}
BASE=http://127.0.0.1:$FAKE_PORT
export XDG_CACHE_HOME="$T/cache"
# gce_key FILE PEM: a key file for the fake's token endpoint, mode 600.
gce_key() {
	"$PY" - "$1" "$2" "$BASE/token" <<'PY'
import json, os, sys
path, pem, uri = sys.argv[1:4]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, json.dumps({"type": "service_account", "project_id": "p1", "private_key_id": "k1",
                         "private_key": open(pem).read(), "client_email": "sd@p1.iam.gserviceaccount.com",
                         "token_uri": uri}).encode())
os.close(fd)
PY
}
KEY=$T/key.json WRONGKEY=$T/wrong.json
gce_key "$KEY" "$T/sa.pem"
gce_key "$WRONGKEY" "$T/other.pem"
