# expect NAME STATUS PATTERN -- ARGS...: runs `$bin $subcommand ARGS...` and
# checks its exit status and that PATTERN is in its stderr (with
# expect_stdout=1: or its stdout); counts into $pass / $fail. Sourced by
# bad_inputs.sh and nvme_bad_inputs.sh (they set bin, tmp, subcommand).
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  "$bin" "$subcommand" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  local where=("$tmp/err")
  [ "${expect_stdout:-0}" = 1 ] && where+=("$tmp/out")
  if [ "$got" -ne "$want" ] || ! grep -qE "$pattern" "${where[@]}"; then
    echo "FAIL $name: exit $got (want $want), stderr: $(head -c 300 "$tmp/err")"
    fail=$((fail + 1))
  else
    echo "ok   $name: exit $got: $(head -n 1 "$tmp/err")"
    pass=$((pass + 1))
  fi
}
