# bash completion for dlock(1): subcommands, their flags, and a few flags'
# values. Installed by `cmake --install` as
# share/bash-completion/completions/dlock. Its zsh twin is _dlock; the test
# adapters/tests/cli_help_test.cc checks both against `dlock SUB --help`.

_dlock() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=${COMP_WORDS[COMP_CWORD - 1]}
  local subcommands="run elect leader status list unlock top monitor bench setup help
    version"
  local backend="--backend --profile --config --namespace --help"
  local flags i
  if ((COMP_CWORD == 1)); then
    COMPREPLY=($(compgen -W "$subcommands --help --version" -- "$cur"))
    return
  fi
  # dlock run NAME -- COMMAND ARGS: a command, then its arguments.
  for ((i = 2; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} == -- ]]; then
      if ((i + 1 == COMP_CWORD)); then
        COMPREPLY=($(compgen -c -- "$cur"))
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi
      return
    fi
  done
  case $prev in
    --config) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --on-lost-signal)
      COMPREPLY=($(compgen -W "TERM INT HUP QUIT KILL USR1 USR2" -- "$cur"))
      return ;;
    --kind)
      COMPREPLY=($(compgen -W "lock semaphore election" -- "$cur"))
      return ;;
    --sort)
      COMPREPLY=($(compgen -W "name held-for lease-left token" -- "$cur"))
      return ;;
    --scenarios)
      COMPREPLY=($(compgen -W "uncontended contention watchdog memory
        semaphore shared exclusive election" -- "$cur"))
      return ;;
  esac
  case ${COMP_WORDS[1]} in
    run) flags="$backend --wait --lease --on-lost-signal --kill-after
      --once-per --slot --at-least-for --at-most-for --pass-env --quiet-skip
      --quiet --shared --permits --take --all" ;;
    elect) flags="$backend --wait --lease --on-lost-signal --kill-after
      --pass-env --quiet --value" ;;
    leader) flags="$backend --json --watch" ;;
    status) flags="$backend --json" ;;
    list) flags="$backend --json --prefix --kind" ;;
    unlock) flags="$backend --json --force --token --kind" ;;
    top) flags="$backend --prefix --interval --sort --once" ;;
    monitor) flags="$backend --prefix --interval --held-longer-than
      --on-held-too-long --hook-timeout --unlock-dead --metrics-listen" ;;
    bench) flags="$backend --json --quiet --quick --scenarios --threads
      --duration --warmup --clients --locks --names --lease --permits
      --handovers --lapses" ;;
    setup) flags="$backend --grant-to" ;;
    help)
      COMPREPLY=($(compgen -W "$subcommands --man --help" -- "$cur"))
      return ;;
    version) flags="--help" ;;
    *) return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  fi
}

complete -F _dlock dlock
