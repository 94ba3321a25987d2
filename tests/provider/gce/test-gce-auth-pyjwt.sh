#!/bin/sh
# tests/provider/gce/test-gce-auth-pyjwt.sh - the JWT assertion of gce-auth.c checked by an
# implementation that is not ours: Python's cryptography makes a fresh
# RSA-2048 key and the service-account key file, tests/provider/gce/test-gce-auth
# --assert signs with it, and PyJWT verifies the RS256 signature with the
# public key and reads the header and claims back.  Then the check is shown
# to be able to fail (one signature character changed), and two key files
# are shown refused with their messages (mode 0644, a missing field).
# /usr/bin/python3, not the python3 first on PATH: the Debian packages
# python3-jwt and python3-cryptography are installed for the system Python.
: "${top_builddir:=$(cd "$(dirname "$0")/../../.." && pwd)}"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY not found" >&2; exit 77; }
exec "$PY" - "$top_builddir/tests/provider/gce/test-gce-auth" <<'PYTHON'
import json, os, shutil, subprocess, sys, tempfile, time

try:
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
except ImportError as e:
    print("SKIP: PyJWT or cryptography cannot be imported (python3-jwt, python3-cryptography): %s" % e,
          file=sys.stderr)
    sys.exit(77)

PROG = sys.argv[1]
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
TOKEN_URI = "https://oauth2.googleapis.com/token"
EMAIL = "trainer@spotdeck-test.iam.gserviceaccount.com"
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL: " + msg, file=sys.stderr)


def ok(msg):
    print("ok: " + msg)


tmp = tempfile.mkdtemp(prefix="spotdeck-gce-auth.")
try:
    priv = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = priv.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()
    public_pem = priv.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    kid = os.urandom(20).hex()
    fields = {"type": "service_account", "project_id": "spotdeck-test", "private_key_id": kid,
              "private_key": pem, "client_email": EMAIL, "client_id": "1234567890",
              "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": TOKEN_URI}

    def write_key(name, data, mode=0o600):
        path = os.path.join(tmp, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
        os.chmod(path, mode)  # whatever the umask
        return path

    def run(path, now):
        return subprocess.run([PROG, "--assert", path, str(now), SCOPE], capture_output=True, text=True,
                              timeout=60)

    keyfile = write_key("key.json", fields)
    # A little in the past, so that PyJWT (which checks iat and exp
    # against its own clock) sees a JWT issued already and still valid.
    now = int(time.time()) - 30
    p = run(keyfile, now)
    token = p.stdout.strip()
    if p.returncode != 0 or not token:
        fail("test-gce-auth --assert exited %d: %s" % (p.returncode, p.stderr.strip()))
        sys.exit(1)

    header = jwt.get_unverified_header(token)
    if header != {"alg": "RS256", "typ": "JWT", "kid": kid}:
        fail("header %r" % header)
    else:
        ok("header alg RS256, typ JWT, kid %s" % kid)
    try:
        claims = jwt.decode(token, public_pem, algorithms=["RS256"], audience=TOKEN_URI, issuer=EMAIL,
                            options={"require": ["iss", "aud", "iat", "exp"], "verify_signature": True,
                                     "verify_exp": True, "verify_iat": True, "verify_aud": True})
    except jwt.PyJWTError as e:
        fail("PyJWT does not accept the JWT: %s: %s" % (type(e).__name__, e))
        claims = None
    want = {"iss": EMAIL, "scope": SCOPE, "aud": TOKEN_URI, "iat": now, "exp": now + 3600}
    if claims is not None:
        if claims != want:
            fail("claims %r, expected %r" % (claims, want))
        else:
            ok("PyJWT verified the RS256 signature; claims %s" % json.dumps(claims))
    # Unpadded base64url, three parts, as RFC 7515 section 7.1 has them.
    parts = token.split(".")
    if len(parts) != 3 or any(c not in "-_" and not c.isalnum() for c in token.replace(".", "")):
        fail("not three base64url parts without padding: %s" % token)

    # The check can fail: one character in the middle of the signature
    # changed (not the last, whose low bits base64url may not use).
    i = len(parts[0]) + len(parts[1]) + 2 + len(parts[2]) // 2
    bad = token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1:]
    try:
        jwt.decode(bad, public_pem, algorithms=["RS256"], audience=TOKEN_URI)
        fail("PyJWT accepted a JWT with a changed signature")
    except jwt.InvalidSignatureError:
        ok("a changed signature character fails verification")
    # And another key's public half does not verify ours.
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        jwt.decode(token, other, algorithms=["RS256"], audience=TOKEN_URI)
        fail("PyJWT accepted the JWT with another key")
    except jwt.InvalidSignatureError:
        ok("another key's public half fails verification")

    # A key file the group and others can read is refused, with the fix.
    open_key = write_key("open.json", fields, 0o644)
    p = run(open_key, now)
    msg = "%s: key file is readable by others (mode 0644); chmod 600 %s" % (open_key, open_key)
    if p.returncode != 1 or p.stdout or p.stderr.strip() != msg:
        fail("mode 0644: exit %d, stdout %r, stderr %r; expected exit 1 and %r"
             % (p.returncode, p.stdout, p.stderr, msg))
    else:
        ok("mode 0644 refused: " + msg)

    # A missing field is named.
    for field in ("client_email", "private_key"):
        partial = dict(fields)
        del partial[field]
        path = write_key("no-%s.json" % field, partial)
        p = run(path, now)
        msg = '%s: no "%s" field in the key file' % (path, field)
        if p.returncode != 1 or p.stdout or p.stderr.strip() != msg:
            fail("no %s: exit %d, stdout %r, stderr %r; expected exit 1 and %r"
                 % (field, p.returncode, p.stdout, p.stderr, msg))
        else:
            ok("missing %s refused: %s" % (field, msg))
    # The private key never shows in a message: a key file whose key is cut
    # short is refused without echoing it.
    cut = dict(fields)
    cut["private_key"] = pem[:len(pem) // 2]
    path = write_key("cut.json", cut)
    p = run(path, now)
    body = pem.splitlines()[3]
    if p.returncode != 1 or body in p.stderr or "is not a PEM private key" not in p.stderr:
        fail("cut key: exit %d, stderr %r" % (p.returncode, p.stderr))
    else:
        ok("cut key refused without showing it: " + p.stderr.strip())
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    print("test-gce-auth-pyjwt.sh: %d failure(s)" % failures, file=sys.stderr)
    sys.exit(1)
print("test-gce-auth-pyjwt.sh: all passed")
PYTHON
