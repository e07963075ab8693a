#!/usr/bin/env bash
# Prints the ACL file of guardian's security Redis: the user guardian, logging
# in with the password on the first line of PASSWORD_FILE, with the rules of
# guardian.acl beside this script; and the default user behind a random
# password printed nowhere else.
#
# The default user keeps every permission, locked away: Redis 7.0 replays
# its append-only file as the default user and drops every transaction that
# user may not run, so a default user turned off loses guardian's hard
# stops on a restart. Set a password of your own with ACL SETUSER to
# administer the server.
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
admin=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
echo "user default on >$admin allkeys allchannels allcommands"
echo "user guardian on >$pw $rules"
