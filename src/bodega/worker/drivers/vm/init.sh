#!/bin/busybox sh
# bodega's guest init: PID 1 of a vm machine, from the initramfs bodega builds
# (initramfs.py). It loads the modules the kernel needs for its disks and network,
# finds its disks by their serials, reads the machine's config (config.py renders it),
# mounts the image's root, swaps on its swap disk if it has one, brings eth0 up with the machine's addresses, and runs the
# image's program in that root as the image's user. It stays PID 1: it forwards the
# signals the worker writes on the second serial port to the program, runs the worker's
# execs beside it (the virtio-serial port bodega.exec) and its consoles (the virtio
# console bodega.console, /dev/hvc0), reaps what is orphaned to it,
# and writes the program's exit code to the status disk before it powers the machine
# off. With bodega.probe on the kernel's command line it prints the kernel's version and
# powers off (the worker's probe at its start).
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /run /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
say() { echo "bodega-init: $*"; }
halt() { sync; poweroff -f; sleep 5; }

if grep -q bodega.probe /proc/cmdline; then
  cat /proc/version
  halt
fi

for module in $(cat /modules); do
  insmod "/modules.d/$module.ko" || say "could not load $module"
done

# Signals from the worker, on the second serial port (signal_line.py): "signal ID N" is
# answered "taken ID" and N sent to the program once per ID (the worker writes a line
# again until it is answered: one written while the port was closed is lost); a signal
# that comes before the program runs waits for its pid in /run/program. "exec" wakes the
# exec loop below. "resize ID CONSOLE ROWS COLS" and "hangup ID CONSOLE" are answered as
# a signal is, and done once per ID for the console CONSOLE, if it runs (below). The port
# is opened here, by PID 1 itself, before the machine is readied, and set raw at once
# ("command": a port that cannot be opened is said, where a failed redirection of a bare
# exec would end PID 1).
command exec 5<>/dev/ttyS1 || say "no signal line"
stty raw -echo <&5 2>/dev/null
mkfifo /run/exec-wake

# signal_session SIGNAL SID: SIGNAL for every process of the session SID (in /proc's
# stat, the fourth field after the command's closing parenthesis)
signal_session() {
  for stat in /proc/[0-9]*/stat; do
    read -r line < "$stat" 2>/dev/null || continue
    # shellcheck disable=SC2086
    set -- "$1" "$2" "${stat#/proc/}" ${line##*) }
    [ "$7" = "$2" ] && kill -"$1" "${3%/stat}" 2>/dev/null
  done
}

# console VERB CONSOLE [ROWS COLS | all]: resize the terminal of the console, if it is
# the one running (/run/console: its id and session), or hang it up: SIGHUP for its
# session, then SIGKILL for what is left of it 5 s later. A console hung up before it
# runs never will (/run/console-hungup: the last such id); "all" hangs up whatever runs,
# a console its worker left (the next one's start line went to it, and was not marked).
console() {
  running= session=
  read -r running session < /run/console 2>/dev/null
  case $session in ''|*[!0-9]*) running= ;; esac
  case $1 in
    resize)
      [ -n "$running" ] && [ "$running" = "$2" ] || return 0
      case $3 in ''|*[!0-9]*) return 0 ;; esac
      case $4 in ''|*[!0-9]*) return 0 ;; esac
      stty rows "$3" cols "$4" < /dev/hvc0 2>/dev/null ;;
    hangup)
      if [ "$running" != "$2" ]; then
        echo "$2" > /run/console-hungup
        [ -n "$running" ] && [ "$3" = all ] || return 0
      fi
      signal_session HUP "$session"
      ( sleep 5; signal_session KILL "$session" ) < /dev/null > /dev/null 2>&1 & ;;
  esac
}

# readdress ADDRESSES GATEWAY4 GATEWAY6: eth0's addresses (comma-separated, "-": none) and
# default routes made anew: a VM moved live to another worker has that worker's address
# there (its MAC is kept). An IPv4 address is announced (gratuitous ARP).
readdress() {
  ip addr flush dev eth0 scope global
  ip route flush dev eth0 2>/dev/null
  for address in $(echo "$1" | tr , ' '); do
    [ "$address" = - ] || ip addr add "$address" dev eth0 || say "could not add $address"
  done
  # Told at once, so that a neighbour that asked for the address before it was here
  # (and was not answered) learns it now rather than at its next try.
  for address in $(echo "$1" | tr , ' '); do
    case $address in *.*) arping -q -U -c 2 -I eth0 "${address%/*}" & ;; esac
  done
  [ "$2" != - ] && { ip route add "$2" dev eth0 2>/dev/null
    ip route replace default via "$2" || say "no route via $2"; }
  [ "$3" != - ] && { ip -6 route add "$3" dev eth0 2>/dev/null
    ip -6 route replace default via "$3" dev eth0 || say "no route via $3"; }
  return 0
}

(
  exec 4<>/run/exec-wake
  taken=
  while read -r word id number; do
    case $word in
      exec) echo >&4; continue ;;
      signal|resize|hangup|address) ;;
      *) continue ;;  # the tail of a line cut as the port opened, say
    esac
    case $id in ''|*[!0-9a-f]*) continue ;; esac
    [ "$word" = signal ] && case $number in ''|*[!0-9]*) continue ;; esac
    echo "taken $id" >&5
    [ "$id" = "$taken" ] && continue
    taken=$id
    if [ "$word" = address ]; then
      # shellcheck disable=SC2086
      readdress $number
      continue
    fi
    if [ "$word" != signal ]; then
      # shellcheck disable=SC2086
      console "$word" $number
      continue
    fi
    until read -r program 2>/dev/null < /run/program; do usleep 20000; done
    kill -"$number" "$program" 2>/dev/null
  done <&5
) < /dev/null &

# disk SERIAL: the device of the virtio disk qemu gave that serial (devtmpfs may make
# the node a moment after the module's probe)
disk() {
  tries=0
  while [ $tries -lt 100 ]; do
    for block in /sys/block/vd*; do
      if [ "$(cat "$block/serial" 2>/dev/null)" = "$1" ] && [ -b "/dev/${block##*/}" ]; then
        echo "/dev/${block##*/}"
        return 0
      fi
    done
    tries=$((tries + 1))
    usleep 50000
  done
  return 1
}

status=$(disk bodega-status)
# finish CODE: the program's exit code to the status disk, the rest ended, power off
finish() {
  say "exit code $1"
  kill -9 -1 2>/dev/null
  if [ -n "$status" ]; then
    printf 'exit=%s\n' "$1" | dd of="$status" conv=notrunc,fsync 2>/dev/null
  fi
  sync
  for target in /newroot/dev/shm /newroot/dev/pts /newroot/dev /newroot/sys /newroot/proc; do
    umount "$target" 2>/dev/null
  done
  umount /newroot 2>/dev/null || mount -o remount,ro /newroot 2>/dev/null
  halt
}
fail() { say "$*"; finish 125; }

config=$(disk bodega-config) || fail "no config disk"
tr -d '\000' < "$config" > /run/config
. /run/config || fail "could not read the config"

root=$(disk bodega-root) || fail "no root disk"
mount -t ext4 "$root" /newroot || fail "could not mount the root disk"
for dir in proc sys dev etc; do mkdir -p "/newroot/$dir"; done
mount -t proc proc /newroot/proc
mount -t sysfs -o ro,nosuid,noexec,nodev sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /newroot/dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 shm /newroot/dev/shm
[ -n "$resolv" ] && printf '%s' "$resolv" > /newroot/etc/resolv.conf
# in_root PATH: where PATH is under /newroot as the program sees it, each symbolic link
# on the way followed within the root (an absolute one from the root, .. never above it)
in_root() {
  rest=${1#/} at= links=0
  while [ -n "$rest" ]; do
    part=${rest%%/*}
    if [ "$part" = "$rest" ]; then rest=; else rest=${rest#*/}; fi
    case $part in
      ''|.) continue ;;
      ..) at=${at%/*}; continue ;;
    esac
    if [ -L "/newroot$at/$part" ]; then
      links=$((links + 1))
      [ $links -gt 40 ] && return 1
      target=$(readlink "/newroot$at/$part")
      case $target in /*) at= ;; esac
      target=${target#/}
      rest=$target${rest:+/$rest}
      continue
    fi
    at=$at/$part
  done
  [ -n "$at" ] && echo "/newroot$at"
}
# put_file MODE PATH BASE64: one of the machine's files (config.files), written at every
# boot before the volumes are mounted, its directories made as mkdir -p makes them
put_file() {
  target=$(in_root "$2") || fail "the file $2 cannot be written: no place for it in the root"
  mkdir -p "${target%/*}" && rm -f "$target" && echo "$3" | base64 -d > "$target" \
    && chmod "$1" "$target" || fail "the file $2 cannot be written"
}
# drop_file PATH: a file an earlier boot wrote whose entry is gone from the config
drop_file() {
  target=$(in_root "$1") && [ -f "$target" ] && [ ! -L "$target" ] && rm -f "$target"
  :
}
write_files
# The machine's volume: a directory of the host, shared by virtiofs under its tag.
for volume in $volumes; do
  mkdir -p "/newroot${volume#*:}"
  mount -t virtiofs "${volume%%:*}" "/newroot${volume#*:}" || fail "could not mount the volume at ${volume#*:}"
done

# The machine's swap (init.swap_size_mb): a disk of its own, made afresh at each start.
if [ -n "$swap" ]; then
  swap_disk=$(disk bodega-swap) && mkswap "$swap_disk" > /dev/null && swapon "$swap_disk" ||
    say "no swap: could not swap on its disk"
fi

hostname "$hostname"
ip link set lo up
[ -w /proc/sys/net/ipv6/conf/eth0/accept_dad ] && echo 0 > /proc/sys/net/ipv6/conf/eth0/accept_dad
ip link set eth0 up || say "no eth0"
for address in $addresses; do
  ip addr add "$address" dev eth0 || say "could not add $address"
done
# A gateway may be outside every address's prefix (a private address is a /128): it is
# on eth0's link all the same, as the namespace's own routes say.
[ -n "$gateway4" ] && { ip route add "$gateway4" dev eth0 2>/dev/null
  ip route add default via "$gateway4" || say "no route via $gateway4"; }
[ -n "$gateway6" ] && { ip -6 route add "$gateway6" dev eth0 2>/dev/null
  ip -6 route add default via "$gateway6" dev eth0 || say "no route via $gateway6"; }

# port NAME: the device of the virtio-serial port qemu gave that name
port() {
  tries=0
  while [ $tries -lt 100 ]; do
    for named in /sys/class/virtio-ports/*/name; do
      if [ "$(cat "$named" 2>/dev/null)" = "$1" ]; then
        named=${named%/name}
        [ -c "/dev/${named##*/}" ] && { echo "/dev/${named##*/}"; return 0; }
      fi
    done
    tries=$((tries + 1))
    usleep 50000
  done
  return 1
}

# exec_command ID TIMEOUT CAP REQUEST STDIN: one exec, run as the program runs (its
# root, directory, user and variables) in a session of its own, its answer on stdout
# as frames (guest_exec.py). REQUEST is base64 of "set -- <quoted literals>", STDIN
# base64 or -. Each output's first CAP bytes are kept, the rest read and dropped, so a
# command is never blocked for writing more; past TIMEOUT seconds its session is killed,
# then what still holds its outputs (a child that left it).
exec_command() {
  id=$1 timeout=$2 cap=$3 stdin=$5 dir=/run/exec
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$4" | base64 -d > "$dir/request" && . "$dir/request" || {
    echo "$id end 125 0"
    return
  }
  : > "$dir/in"
  [ "$stdin" = - ] || echo "$stdin" | base64 -d > "$dir/in"
  mkfifo "$dir/out.fifo" "$dir/err.fifo"
  setsid sh -c 'head -c "$1" > "$2"; exec cat > /dev/null' drain "$cap" "$dir/out" \
    < "$dir/out.fifo" > /dev/null 2>&1 &
  out=$!
  setsid sh -c 'head -c "$1" > "$2"; exec cat > /dev/null' drain "$cap" "$dir/err" \
    < "$dir/err.fifo" > /dev/null 2>&1 &
  err=$!
  (
    program_env
    exec setsid nsenter -r/newroot -w"/newroot$workdir" -S "$uid" -G "$gid" -F -- "$@"
  ) < "$dir/in" > "$dir/out.fifo" 2> "$dir/err.fifo" &
  command=$!
  setsid sh -c 'sleep "$1"; : > "$2"; kill -9 -"$3"; sleep 1; kill -9 -"$4" -"$5"' \
    watch "$timeout" "$dir/timed-out" "$command" "$out" "$err" < /dev/null > /dev/null 2>&1 &
  watch=$!
  wait "$command"
  code=$?
  wait "$out" "$err"
  kill -9 -"$watch" 2>/dev/null
  late=0
  [ -e "$dir/timed-out" ] && late=1
  base64 "$dir/out" | sed "s/^/$id out /"
  base64 "$dir/err" | sed "s/^/$id err /"
  echo "$id end $code $late"
  rm -rf "$dir"
}

# Execs from the worker, one at a time, a request a line: "ID hello" (answered "ID
# ready": a command is only sent to an init that listens) or "ID run TIMEOUT CAP REQUEST
# STDIN". While no one is connected on the host's side the port reads as at its end at
# once: rather than poll it, the loop sleeps until the worker wakes it (on the signal
# line), then reads the port until it has been at its end for 2 s. The port is fd 3,
# closed for the commands.
(
  exec_port=$(port bodega.exec) || { say "no exec port"; exit 0; }
  exec 3<>"$exec_port" 4<>/run/exec-wake
  while read -r _ <&4; do
    quiet=0
    while [ $quiet -lt 20 ]; do
      if ! read -r id verb timeout cap request stdin <&3; then
        quiet=$((quiet + 1))
        usleep 100000
        continue
      fi
      quiet=0
      case $id in
        ''|*[!0-9a-f]*) continue ;;
      esac
      case $verb in
        hello) echo "$id ready" >&3 ;;
        run)
          case $timeout$cap in
            ''|*[!0-9.]*) echo "$id end 125 0" >&3; continue ;;
          esac
          ( exec_command "$id" "$timeout" "$cap" "$request" "$stdin" ) \
            < /dev/null >&3 2> /dev/null 3>&- 4>&-
          ;;
      esac
    done
  done
) < /dev/null 5<&- &

# Consoles from the worker (guest_console.py), one at a time, on the virtio console
# bodega.console: the guest's /dev/hvc0, a terminal, which has nothing to read (not an
# end, as a virtio-serial port has) while no one is on the host's end, so its loop needs
# no wake. A start line, read raw, "bodega-console ID ROWS COLS REQUEST" (REQUEST as an
# exec's; no argv: the image's /bin/sh), runs the command as an exec runs, but on the
# terminal, in a session of its own whose controlling terminal it is, at that size and
# with TERM=xterm unless the machine sets one. Its start and then its end with its exit
# code are marked on the terminal: ESC ] bodega-start;ID BEL and ESC ] bodega-exit;ID;
# CODE BEL. The loop runs in a shell of its own (it sources the config again), started
# by setsid twice: the second forks it off a command of PID 1's foreground, whose
# SIGINT is not ignored, where a background one's is and every program of its consoles
# would keep that (Ctrl-C would interrupt nothing).
cat > /run/console-loop <<'LOOP'
. /run/config
tries=0
until [ -c /dev/hvc0 ]; do
  tries=$((tries + 1))
  [ $tries -gt 100 ] && { echo "bodega-init: no console port"; exit 0; }
  usleep 50000
done
# In a subshell: the loop's shell leads its session, and a leader opening a terminal
# would take it for its own controlling terminal, which no console's session could then.
# The terminal is opened again after each console: as the leader of the console's session
# leaves, the kernel hangs up the terminal it controlled, and every open of it before
# that reads and writes nothing more (EIO).
(
  command exec 7<>/dev/hvc0
  while :; do
    if ! stty raw -echo <&7 2>/dev/null; then
      usleep 100000
      command exec 7<>/dev/hvc0
      continue
    fi
    read -r magic id rows cols request <&7 || { usleep 100000; continue; }
    [ "$magic" = bodega-console ] || continue
    case $id in ''|*[!0-9a-f]*) continue ;; esac
    case $rows in ''|*[!0-9]*) continue ;; esac
    case $cols in ''|*[!0-9]*) continue ;; esac
    hungup=
    read -r hungup < /run/console-hungup 2>/dev/null
    [ "$hungup" = "$id" ] && continue  # its worker gave up on it before it started
    echo "$request" | base64 -d > /run/console-request 2>/dev/null || continue
    set --
    . /run/console-request
    [ $# -gt 0 ] || set -- /bin/sh
    stty sane rows "$rows" cols "$cols" <&7
    printf '\033]bodega-start;%s\007' "$id" >&7
    (
      read -r self _ < /proc/self/stat
      echo "$id $self" > /run/console
      export TERM=xterm
      program_env
      exec setsid -c nsenter -r/newroot -w"/newroot$workdir" -S "$uid" -G "$gid" -F -- "$@"
    ) <&7 >&7 2>&7 7<&-
    code=$?
    rm -f /run/console
    command exec 7<>/dev/hvc0
    printf '\033]bodega-exit;%s;%s\007' "$id" "$code" >&7
  done
)
LOOP
setsid setsid sh /run/console-loop < /dev/null 5<&-

# The program, in the image's root as the image's user; its environment is the kernel's
# (HOME, TERM) and the machine's variables: the init's own are never exported. It runs in
# the foreground: a shell starts a background command with SIGINT and SIGQUIT ignored,
# and a program keeps an ignore it was started with (a shell cannot even trap it), so
# SIGINT, a machine's stop signal by default, would never reach it. The subshell's pid,
# read by the subshell itself, is the program's: nsenter -F execs it in place. It is
# waited for by a subshell whose own stderr goes nowhere, where a shell says that its
# foreground job was killed ("Terminated"): the program's stderr is the console still.
# While it runs, ash's wait reaps every child that ends, the orphans given to PID 1 too.
(
  (
    read -r self _ < /proc/self/stat
    echo "$self" > /run/program
    program_env
    exec nsenter -r/newroot -w"/newroot$workdir" -S "$uid" -G "$gid" -F -- "$@"
  ) 2>&6 6>&-
  exit "$?"
) < /dev/null 5<&- 6>&2 2>/dev/null
finish "$?"
