# Sourced by scripts that need a tool from crates.io (changelog.sh: git-cliff, deny.sh:
# cargo-deny). cargo_tool NAME VERSION [cargo install args...] prints the path of NAME's
# binary, installing it once with `cargo install --locked` into
# ${POD_DIRECTOR_CACHE:-~/.cache/pod-director}/tools/NAME-VERSION (keyed by version; a
# lock keeps concurrent runs from building it twice); a variable named after the tool
# (git-cliff: GIT_CLIFF) overrides it with a path. The caller defines log and die.

cargo_tool() {
  local name=$1 version=$2 override
  shift 2
  override=${name^^}
  override=${override//-/_}
  if [[ -n "${!override:-}" ]]; then
    echo "${!override}"
    return
  fi
  local cache="${POD_DIRECTOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pod-director}"
  local dir="$cache/tools/$name-$version" lock
  local bin="$dir/bin/$name"
  if [[ ! -x "$bin" ]]; then
    command -v cargo >/dev/null || die "cargo is needed to install $name $version"
    mkdir -p "$cache/tools"
    exec {lock}>"$cache/tools/.$name.lock"
    flock "$lock"
    if [[ ! -x "$bin" ]]; then
      local start=$SECONDS tmp="$dir.tmp.$$"
      log "installing $name $version from crates.io into $dir (once)"
      rm -rf "$tmp"
      cargo install "$name" --version "$version" --locked "$@" --root "$tmp" --quiet >&2 || {
        rm -rf "$tmp"
        die "cargo install $name $version failed"
      }
      rm -rf "$dir"
      mv "$tmp" "$dir"
      log "installed $name in $((SECONDS - start))s"
    fi
    exec {lock}>&-
  fi
  echo "$bin"
}
