#!/usr/bin/env bash
# Prints the ACL file of guardian's security Redis: the default user off, and
# the user guardian, logging in with the password on the first line of
# PASSWORD_FILE, with the rules of guardian.acl beside this script.
#
#   bash deploy/redis/users-acl.sh PASSWORD_FILE > users.acl
#
# Give users.acl to redis-server as --aclfile, and PASSWORD_FILE to guardian
# as --redis-password-file. Keep both secret.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 PASSWORD_FILE" >&2
	exit 2
fi
pw=$(head -n 1 "$1" | tr -d '\r')
if [ -z "$pw" ] || [[ "$pw" =~ [[:space:]] ]]; then
	echo "users-acl: the first line of $1 must be a password without spaces" >&2
	exit 1
fi
rules=$(grep -v '^[[:space:]]*#' "$(dirname "$0")/guardian.acl" | tr -s '\n' ' ')
echo "user default off"
echo "user guardian on >$pw $rules"
