#!/usr/bin/env bash
# The documentation's shell examples, run as tests.
#
# Every fenced ```sh block of README.md and docs/*.md is executed, the blocks
# of one file in order, in one bash process per file, in a fresh temporary
# directory per file, with BIN_DIR first on PATH and ./build/bin pointing at
# BIN_DIR (so the README's "build/bin/fedsvd ..." works as written). Every
# command must exit 0; the first one that does not fails its block, and the
# rest of that file is not run (later blocks use its files) and counts as
# failed. docs/deploy.md is not run here: the multi-host test runs its
# blocks. Command synopses belong in ```text blocks, which are not run.
#
# Claims. The figures the text states are checked against the output of the
# command they follow:
#   cmd ...   # prints TEXT        stdout, trimmed, is exactly TEXT (a
#                                  trailing " (remark)" is not part of TEXT)
#   cmd ...   # expect OP V        the first number on stdout satisfies OP V
#   cmd ...   # expect LABEL OP V  the first number after the first
#                                  occurrence of LABEL on stdout satisfies it
# OP is one of < <= > >= = and ~; "~ V" is an order-of-magnitude claim:
# the value lies within a factor of 10 of V (V/10 <= |x| <= 10 V). A claim
# goes at the end of the command's last line or on a comment line of its
# own right after the command. Any other comment is prose and not checked.
# Blocks whose commands start with "$ " are transcripts: the lines after a
# "$ cmd" line, up to the next "$ " line, are its exact stdout.
#
# Skipping: an HTML comment "<!-- doctest: skip REASON -->" on the line
# just above the fence skips that block; the runner prints each skip and
# its reason. Keep such blocks to the ones that cannot run inside `make
# test` (the set-up block that runs `make test` itself).
#
#   tests/doctest/run.sh [BIN_DIR]       (default build/bin)
#   DOCTEST_FILES="README.md docs/cli.md"  run only these files
#   DOCTEST_TIMEOUT=S                    seconds per file (default 300)
#   KEEP=1                               keep the temporary directories
# Ends with "doctest: P passed, F failed" (a block and a claim count one
# test each); exits non-zero on a failure.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-build/bin}
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
pass=0
failn=0
skips=0
finish() {
  echo "doctest: $pass passed, $failn failed"
  [ "$failn" -eq 0 ]
  exit $?
}
for b in fedsvd aggregation-server masking-server client-agent; do
  if [ ! -x "$BIN/$b" ]; then
    echo "FAIL $BIN/$b not built"
    failn=$((failn + 1))
  fi
done
[ "$failn" -eq 0 ] || finish
BIN=$(cd "$BIN" && pwd)

cd "$ROOT" || exit 1
if [ -n "${DOCTEST_FILES:-}" ]; then
  read -r -a FILES <<<"$DOCTEST_FILES"
else
  FILES=(README.md)
  for f in docs/*.md; do
    [ "$f" = docs/deploy.md ] || FILES+=("$f")
  done
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/doctest.XXXXXX")
cleanup() {
  if [ -n "${KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT

# ---- extraction: one record per ```sh block -------------------------------
# Prints, per block: "B <line> <skip reason or ->", then "L <line> <text>"
# per line (the fence's indentation removed), then "E".
extract() {
  awk '
    function strip(s, n) { # remove up to n leading spaces
      while (n > 0 && substr(s, 1, 1) == " ") { s = substr(s, 2); n-- }
      return s
    }
    {
      if (!inb) {
        if (match($0, /^ *```sh[ \t]*$/)) {
          ind = index($0, "`") - 1
          inb = 1
          reason = "-"
          if (match(prev, /<!-- *doctest: *skip[^>]*-->/)) {
            reason = prev
            sub(/.*<!-- *doctest: *skip */, "", reason)
            sub(/ *-->.*/, "", reason)
            if (reason == "") reason = "(no reason given)"
          }
          print "B " NR " " reason
        }
        prev = $0
        next
      }
      if (match($0, /^ *``` *$/)) { print "E"; inb = 0; prev = $0; next }
      print "L " NR " " strip($0, ind)
    }
    END { if (inb) print "E" }
  ' "$1"
}

# ---- the script for one file -----------------------------------------------
# The prelude: run a command with its stdout and stderr captured, then check
# its exit status and the claims about its output.
PRELUDE=$(cat <<'EOS'
dt_res() { printf '%s\n' "$*" >>"$DT_RESULTS"; }
dt_fail() { # LOC MESSAGE: the command failed; the rest of the file is not run
  dt_res "FAIL $1 $2"
  echo "--- stderr of the failed command (last 15 lines):"
  tail -n 15 "$DT_DIR/err"
  exit 1
}
dt_after() { # LOC RC
  cat "$DT_DIR/out"
  [ "$2" -eq 0 ] || dt_fail "$1" "command exited $2"
}
dt_trim() { sed -e 's/[[:space:]]*$//' "$1" | awk '{ l[NR] = $0 } END { n = NR; while (n > 0 && l[n] == "") n--; for (i = 1; i <= n; i++) print l[i] }'; }
dt_prints() { # LOC TEXT
  local got
  got=$(dt_trim "$DT_DIR/out")
  if [ "$got" = "$2" ]; then dt_res "PASS $1 prints $2"
  else dt_res "FAIL $1 prints $2 (got: $(printf '%s' "$got" | head -c 200 | tr '\n' ' '))"; fi
}
dt_transcript() { # LOC EXPECTED-FILE
  if [ "$(dt_trim "$DT_DIR/out")" = "$(dt_trim "$2")" ]; then dt_res "PASS $1 output as shown"
  else dt_res "FAIL $1 output differs from the text (got: $(dt_trim "$DT_DIR/out" | head -c 200 | tr '\n' ' '))"; fi
}
dt_expect() { # LOC LABEL OP VALUE
  local v
  v=$(awk -v label="$2" '
    { text = text $0 "\n" }
    END {
      if (label != "") { i = index(text, label); if (i == 0) exit; text = substr(text, i + length(label)) }
      if (match(text, /[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?/)) print substr(text, RSTART, RLENGTH)
    }' "$DT_DIR/out")
  local what="${2:+$2 }$3 $4"
  if [ -z "$v" ]; then dt_res "FAIL $1 expect $what (no number${2:+ after '$2'} in the output)"; return; fi
  if awk -v x="$v" -v op="$3" -v y="$4" 'BEGIN {
      x += 0; y += 0; a = x < 0 ? -x : x
      if (op == "<") ok = x < y; else if (op == "<=") ok = x <= y
      else if (op == ">") ok = x > y; else if (op == ">=") ok = x >= y
      else if (op == "=") ok = x == y
      else if (op == "~") ok = a >= y / 10 && a <= y * 10
      else ok = 0
      exit !ok }'; then dt_res "PASS $1 expect $what (got $v)"
  else dt_res "FAIL $1 expect $what (got $v)"; fi
}
EOS
)

# Escape a string as one single-quoted shell word.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# Emit the checks of one claim comment (the text after "#"), if it is one.
# Returns 1 when the comment is not a claim.
claim_code() { # LOC COMMENT
  local c=$2 re_num='[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?'
  c=${c#"${c%%[![:space:]]*}"}
  if [[ $c =~ ^prints[[:space:]]+(.*)$ ]]; then
    local text=${BASH_REMATCH[1]}
    text=$(printf '%s' "$text" | sed -E 's/[[:space:]]+\([^()]*\)[[:space:]]*$//; s/[[:space:]]*$//')
    echo "dt_prints $(q "$1") $(q "$text")"
    NCLAIMS=$((NCLAIMS + 1))
    return 0
  fi
  if [[ $c =~ ^expect[[:space:]]+((.*[^\<\>=~[:space:]])[[:space:]]+)?(\<=|\>=|\<|\>|=|~)[[:space:]]*($re_num)([[:space:]].*)?$ ]]; then
    echo "dt_expect $(q "$1") $(q "${BASH_REMATCH[2]}") $(q "${BASH_REMATCH[3]}") $(q "${BASH_REMATCH[4]}")"
    NCLAIMS=$((NCLAIMS + 1))
    return 0
  fi
  if [[ $c =~ ^(prints|expect)([[:space:]]|$) ]]; then
    echo "dt_res $(q "FAIL $1 unreadable claim: $c")"
    NCLAIMS=$((NCLAIMS + 1))
    return 0
  fi
  return 1
}

# The trailing comment of a command (all its lines in $1): the text after
# the first " #" of its last line that bash treats as the start of a comment
# (the command without it still parses), else empty.
trailing_comment() {
  local cmd=$1 last rest pre i
  last=${cmd##*$'\n'}
  pre=${cmd:0:${#cmd}-${#last}}
  rest=$last
  i=0
  while [[ $rest == *" #"* ]]; do
    local before=${rest%%" #"*}
    i=$((i + ${#before}))
    if bash -n -c "$pre${last:0:$i}" 2>/dev/null; then
      printf '%s' "${last:$i+2}"
      return 0
    fi
    i=$((i + 2))
    rest=${last:$i}
  done
}

# Emit one command (its lines in CMD, starting at line START).
emit_command() { # FILE START
  local loc="$1:$2" c
  echo "dt_loc=$(q "$loc")"
  echo "{"
  printf '%s\n' "$CMD"
  echo "} >\"\$DT_DIR/out\" 2>\"\$DT_DIR/err\" </dev/null"
  echo "dt_after \"\$dt_loc\" \$?"
  c=$(trailing_comment "$CMD")
  [ -n "$c" ] && claim_code "$loc" "$c"
  return 0
}

# Build the script of one file; sets NBLOCKS, NCLAIMS; prints skips.
build_script() { # FILE OUT
  local file=$1 out=$2 kind line text reason start=0 bstart in_cmd transcript
  local -a lines=() nums=()
  NBLOCKS=0
  NCLAIMS=0
  {
    echo "$PRELUDE"
    while IFS= read -r rec; do
      kind=${rec%% *}
      case $kind in
      B)
        rec=${rec#B }
        bstart=${rec%% *}
        reason=${rec#* }
        lines=()
        nums=()
        ;;
      L)
        rec=${rec#L }
        nums+=("${rec%% *}")
        if [[ $rec == *" "* ]]; then lines+=("${rec#* }"); else lines+=(""); fi
        ;;
      E)
        if [ "$reason" != "-" ]; then
          echo "skip $file:$bstart ($reason)" >&3
          echo "dt_res $(q "SKIP $file:$bstart $reason")"
          continue
        fi
        NBLOCKS=$((NBLOCKS + 1))
        echo "echo $(q "== $file:$bstart"); dt_t0=\$(date +%s%N)"
        transcript=0
        for text in "${lines[@]}"; do [[ $text == '$ '* ]] && transcript=1; done
        CMD=""
        if [ "$transcript" -eq 1 ]; then
          local i=0 n=${#lines[@]} exp
          while [ "$i" -lt "$n" ]; do
            text=${lines[$i]}
            if [[ $text == '$ '* ]]; then
              start=${nums[$i]}
              CMD=${text#'$ '}
              i=$((i + 1))
              exp=$(mktemp "$T/exp.XXXXXX")
              while [ "$i" -lt "$n" ] && [[ ${lines[$i]} != '$ '* ]]; do
                printf '%s\n' "${lines[$i]}" >>"$exp"
                i=$((i + 1))
              done
              emit_command "$file" "$start"
              echo "dt_transcript $(q "$file:$start") $(q "$exp")"
              NCLAIMS=$((NCLAIMS + 1))
            else
              i=$((i + 1))
            fi
          done
        else
          in_cmd=0
          local j
          for j in "${!lines[@]}"; do
            text=${lines[$j]}
            line=${nums[$j]}
            if [ "$in_cmd" -eq 0 ]; then
              local t=${text#"${text%%[![:space:]]*}"}
              if [ -z "$t" ]; then continue; fi
              if [[ $t == '#'* ]]; then
                # a comment line: a claim about the previous command, or prose
                if [ "$start" -gt 0 ]; then claim_code "$file:$start" "${t#\#}" || true; fi
                continue
              fi
              CMD=$text
              start=$line
              in_cmd=1
            else
              CMD+=$'\n'"$text"
            fi
            if bash -n -c "$CMD" 2>/dev/null && [[ $text != *'\' ]]; then
              emit_command "$file" "$start"
              in_cmd=0
            fi
          done
          if [ "$in_cmd" -eq 1 ]; then
            echo "dt_res $(q "FAIL $file:$start incomplete command at the end of the block")"
            NCLAIMS=$((NCLAIMS + 1))
          fi
          start=0
        fi
        echo "dt_res $(q "BLOCK $file:$bstart") \"(\$(( (\$(date +%s%N) - dt_t0) / 1000000 )) ms)\""
        ;;
      esac
    done < <(extract "$file")
  } >"$out"
}

# ---- run ------------------------------------------------------------------
t_all=$(date +%s)
n=0
for f in "${FILES[@]}"; do
  [ -f "$f" ] || { echo "FAIL $f: no such file"; failn=$((failn + 1)); continue; }
  n=$((n + 1))
  W=$T/$n
  mkdir -p "$W/work/build" "$W/dt"
  ln -s "$BIN" "$W/work/build/bin"
  build_script "$f" "$W/script.sh" 3>&1
  [ "$NBLOCKS" -gt 0 ] || continue
  : >"$W/results"
  t0=$(date +%s)
  (cd "$W/work" &&
    PATH="$BIN:$PATH" TMPDIR="$W/dt" DT_DIR="$W/dt" DT_RESULTS="$W/results" \
      timeout -k 5 "${DOCTEST_TIMEOUT:-300}" bash "$W/script.sh") >"$W/log" 2>&1
  rc=$?
  secs=$(($(date +%s) - t0))
  done_blocks=$(grep -c '^BLOCK ' "$W/results")
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "FAIL $f: timed out after ${DOCTEST_TIMEOUT:-300} s (in block $((done_blocks + 1)))"
    failn=$((failn + 1))
  fi
  while IFS= read -r r; do
    case $r in
    PASS*) pass=$((pass + 1)); echo "ok   ${r#PASS }" ;;
    FAIL*) failn=$((failn + 1)); echo "FAIL ${r#FAIL }" ;;
    BLOCK*) pass=$((pass + 1)); r=${r#BLOCK }; echo "ok   ${r%% *} block ${r#* }" ;;
    SKIP*) skips=$((skips + 1)) ;;
    esac
  done <"$W/results"
  left=$((NBLOCKS - done_blocks))
  if [ "$rc" -ne 0 ]; then
    # the failed block was reported by dt_fail (or the timeout); the later
    # ones did not run
    grep -q '^FAIL ' "$W/results" || { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } ||
      { echo "FAIL $f: the script stopped (exit $rc)"; failn=$((failn + 1)); }
    [ "$left" -gt 1 ] && { echo "FAIL $f: $((left - 1)) later block(s) not run"; failn=$((failn + left - 1)); }
    echo "--- log of $f (last 30 lines):"
    tail -n 30 "$W/log"
  fi
  echo "   $f: $NBLOCKS block(s), $NCLAIMS claim(s), ${secs}s"
done
echo "doctest: $skips block(s) skipped, $(($(date +%s) - t_all))s"
finish
