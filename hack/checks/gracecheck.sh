# Sourced by the release checks: builds hack/checks/gracecheck (Go, cached by the Go build
# cache) into a temporary folder and runs it with the caller's arguments, from the
# caller's working directory so that relative paths keep their meaning.
gracecheck() {
  local tmp rc=0
  tmp="$(mktemp -d)"
  if ! (cd "$root" && go build -o "$tmp/gracecheck" ./hack/checks/gracecheck); then
    rm -rf "$tmp"
    echo "FAIL: could not build hack/checks/gracecheck" >&2
    return 1
  fi
  "$tmp/gracecheck" "$@" || rc=$?
  rm -rf "$tmp"
  return "$rc"
}
