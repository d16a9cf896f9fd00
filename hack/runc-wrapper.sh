#!/bin/sh
# shelljob-runc: an OCI runtime wrapper for machines whose capability bounding
# set lacks some capabilities (on the Firecracker VMs that build this project,
# CAP_SYS_RESOURCE). runc fails to start a privileged container there with
# "unable to apply caps: operation not permitted", since a privileged spec
# asks for every capability the kernel knows.
#
# Before handing over to the real runc with its arguments unchanged, it edits
# the OCI specs that runc is about to read:
#   - create/run: <bundle>/config.json, from --bundle/-b (or the cwd);
#   - exec:       the process spec from --process/-p (docker exec, kubectl exec);
# It removes from every capability list each capability that is missing from
# CapBnd in /proc/self/status. Without CAP_SYS_RESOURCE, it also raises
# process.oomScoreAdj to our own oom_score_adj when the spec asks for less
# (lowering it needs that capability; runc then fails with "can't get final
# child's PID from pipe: EOF", e.g. for static pods, which get -998).
#
# Installed by hack/docker-engine.sh as Docker's default runtime, and in the
# kind node image as containerd's runc BinaryName. Needs jq.
# The real runc is $SHELLJOB_REAL_RUNC, or the first other runc on a usual path.
set -eu

self=$(readlink -f "$0")
real="${SHELLJOB_REAL_RUNC:-}"
if [ -z "$real" ]; then
  for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
    if [ -x "$d/runc" ] && [ "$(readlink -f "$d/runc")" != "$self" ]; then real="$d/runc"; break; fi
  done
fi
[ -n "$real" ] || { echo "shelljob-runc: no runc found" >&2; exit 127; }

# Capabilities the kernel names, by number (linux/capability.h).
names="CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER
SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE
SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP
MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF
CHECKPOINT_RESTORE"

bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
drop=""; no_resource=0; i=0
for n in $names; do
  if [ $(( (0x$bnd >> i) & 1 )) -eq 0 ]; then
    drop="$drop${drop:+,}\"CAP_$n\""
    [ "$n" != SYS_RESOURCE ] || no_resource=1
  fi
  i=$((i + 1))
done
[ -n "$drop" ] || exec "$real" "$@"

bundle=""; process=""; cmd=""; prev=""
for a in "$@"; do
  case "$prev" in
    --bundle|-b) bundle="$a" ;;
    --process|-p) process="$a" ;;
    --root|--log|--log-format|--criu|--rootless) ;;
    *) case "$a" in
         --bundle=*) bundle="${a#--bundle=}" ;;
         --process=*) process="${a#--process=}" ;;
         -*) ;;
         *) [ -n "$cmd" ] || cmd="$a" ;;
       esac ;;
  esac
  prev="$a"
done

# edit FILE FILTER: rewrites a JSON file in place through jq.
edit() {
  jq -c --argjson drop "[$drop]" --argjson cur "$cur" --argjson fixoom "$no_resource" "$2" "$1" > "$1.shelljob-tmp"
  mv "$1.shelljob-tmp" "$1"
}
cur=$(cat /proc/self/oom_score_adj 2>/dev/null || echo 0)
caps='with_entries(.value |= if type == "array" then map(select(IN($drop[]) | not)) else . end)'

case "$cmd" in
  create|run)
    [ -n "$bundle" ] || bundle=.
    if [ -f "$bundle/config.json" ]; then
      edit "$bundle/config.json" "if .process.capabilities then .process.capabilities |= $caps else . end
        | if \$fixoom == 1 and .process.oomScoreAdj != null and .process.oomScoreAdj < \$cur
          then .process.oomScoreAdj = \$cur else . end"
    fi ;;
  exec)
    if [ -n "$process" ] && [ -f "$process" ]; then
      edit "$process" "if .capabilities then .capabilities |= $caps else . end"
    fi ;;
esac
exec "$real" "$@"
