#!/bin/sh
# The AWS credential chain (src/provider/aws/aws-creds.c) against botocore's,
# the chain of the AWS CLI and boto3: for the same files and variables,
# both must pick the same key id and session token, or both find none.
# Cases: each file alone, profiles from either file, the environment over
# the files, key names in other case, comments, blank values, a profile
# without a key.  botocore runs with only its environment and file
# providers (its instance-role and container providers removed, and
# AWS_EC2_METADATA_DISABLED set), so it sends nothing anywhere.  Debian's
# python3-botocore is used; without it the test is skipped.
. "${top_srcdir:-$(dirname "$0")/../../..}/tests/lib.sh"
PROBE="$top_builddir/tests/provider/aws/test-aws-creds"
PY=/usr/bin/python3
if ! [ -x "$PY" ] || ! "$PY" -c 'import botocore.session' 2>/dev/null; then
	echo "SKIP: botocore cannot be imported by $PY (Debian: python3-botocore)" >&2
	exit 77
fi
[ -x "$PROBE" ] || fail "$PROBE is not built"
tmpdir
mkdir -p "$T/home/.aws"
C="$T/home/.aws/credentials" F="$T/home/.aws/config"

cat > "$T/chain.py" <<'PY'
import botocore.session
try:
    s = botocore.session.Session()
    r = s.get_component('credential_provider')
    for m in ('ec2-credentials-file', 'boto-config', 'container-role', 'iam-role'):
        r.remove(m)
    c = r.load_credentials()
except Exception as e:
    print("error", type(e).__name__)
else:
    print("none" if c is None else "ok %s %s" % (c.access_key, c.token or "-"))
PY

n=0
# case NAME: compares the two under the current files and variables.
# WANT is the first field both must give ("ok", "none" or "error"; an
# error is compared by kind only).
case_() {
	n=$((n + 1))
	ours=$(env -i PATH="$PATH" HOME="$T/home" $VARS "$PROBE" --probe | cut -d' ' -f1-3)
	case "$ours" in none\ *) ours=none ;; error\ *) ours=error ;; esac
	theirs=$(env -i PATH="$PATH" HOME="$T/home" AWS_EC2_METADATA_DISABLED=true $VARS "$PY" "$T/chain.py")
	case "$theirs" in error\ *) theirs=error ;; esac
	[ "$ours" = "$theirs" ] || fail "case $n ($1): ours \"$ours\", botocore \"$theirs\""
	[ "${ours%% *}" = "$2" ] || fail "case $n ($1): both gave \"$ours\", want $2"
	echo "case $n ($1): $ours  ok"
}

printf '[default]\naws_access_key_id = AKIADEFAULTCRED1\naws_secret_access_key = s1\n\n# comment\n; other comment\n[prod]\nAWS_Access_Key_Id=AKIAPRODCRED0002\naws_secret_access_key=s2\naws_session_token = FwoGZXIvProd==\n[empty]\naws_access_key_id =\naws_secret_access_key =\n' > "$C"
printf '[default]\nregion = eu-west-1\naws_access_key_id = AKIADEFAULTCONF3\naws_secret_access_key = s3\n[profile staging]\naws_access_key_id = AKIASTAGINGCONF4\naws_secret_access_key = s4\naws_session_token = stagingToken\n' > "$F"
chmod 600 "$C" "$F"

VARS=""
case_ "credentials [default] first" ok
VARS="AWS_PROFILE=prod"
case_ "a profile of the credentials file, with a token, key names in other case" ok
VARS="AWS_PROFILE=staging"
case_ "[profile staging] of the config file" ok
VARS="AWS_PROFILE=prod AWS_ACCESS_KEY_ID=AKIAENVIRONMENT5 AWS_SECRET_ACCESS_KEY=s5"
case_ "the environment over the files" ok
VARS="AWS_ACCESS_KEY_ID=AKIAENVIRONMENT6 AWS_SECRET_ACCESS_KEY=s6 AWS_SESSION_TOKEN=envToken"
case_ "the environment's token" ok
VARS="AWS_SHARED_CREDENTIALS_FILE=$T/nowhere"
case_ "no credentials file: config [default]" ok
VARS="AWS_SHARED_CREDENTIALS_FILE=$T/nowhere AWS_CONFIG_FILE=$T/nowhere2"
case_ "no file at all" none
VARS="AWS_ACCESS_KEY_ID=AKIAHALFAKEY0007"
case_ "half a key in the environment" error
VARS="AWS_PROFILE=nosuch"
case_ "a profile neither file has" error
mv "$C" "$T/home/.aws/other"
VARS="AWS_SHARED_CREDENTIALS_FILE=$T/home/.aws/other AWS_PROFILE=prod"
case_ "AWS_SHARED_CREDENTIALS_FILE" ok

# Where botocore and we part, on purpose: a readable file (we refuse it),
# a profile with blank keys (botocore raises), a profile that is missing.
chmod 644 "$T/home/.aws/other"
out=$(env -i HOME="$T/home" AWS_SHARED_CREDENTIALS_FILE="$T/home/.aws/other" "$PROBE" --probe)
case "$out" in
"error $T/home/.aws/other: holds AWS keys and is readable by others (mode 0644); chmod 600 $T/home/.aws/other") ;;
*) fail "a readable credentials file: \"$out\"" ;;
esac
echo "a readable credentials file is refused  ok"
echo "$n cases agree with botocore"
