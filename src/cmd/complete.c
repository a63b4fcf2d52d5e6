/*
 * `vramguard completion bash|zsh|fish`: shell completion scripts generated from the same option
 * tables that give --help and the parse (opt.h), so a new option or a new word of a value is
 * completed as soon as it exists. What a row says decides what its value completes to: the
 * words of its val.words, directories for a DIR, files for a FILE or PATH, nothing otherwise.
 * The commands, their summaries and their operands come from main's command table.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"

static const char vg_completion_help[] =
    "usage: vramguard completion bash|zsh|fish\n"
    "\n"
    "Print the completion script for the shell, generated from the option tables --help is\n"
    "made from. 'make install' installs all three; to try one in the current shell:\n"
    "  bash: source <(vramguard completion bash)\n"
    "  zsh:  source <(vramguard completion zsh)   (after compinit)\n"
    "  fish: vramguard completion fish | source\n";

static const char vg_completion_help_tail[] = "\n"
                                              "Exit status: 0; 64 bad usage.\n"
                                              "\n";

static const struct vg_opt vg_completion_opts[] = {
    VG_OPT_TABLE_END,
};

/* What an option's value completes to. */
enum vg_complete_value { VG_CV_NONE, VG_CV_WORDS, VG_CV_DIR, VG_CV_FILE, VG_CV_FREE };

static enum vg_complete_value vg_complete_value(const struct vg_opt *o)
{
    if (o->arg == VG_OPT_ARG_NONE)
        return VG_CV_NONE;
    if (o->val.words)
        return VG_CV_WORDS;
    if (o->metavar && strcmp(o->metavar, "DIR") == 0)
        return VG_CV_DIR;
    if (o->metavar && (strcmp(o->metavar, "FILE") == 0 || strcmp(o->metavar, "PATH") == 0))
        return VG_CV_FILE;
    return VG_CV_FREE;
}

/* Whether o, a row of a command's table, is listed by the global table already (the parse
 * takes the global one: vg_opt_longopts skips the second). */
static bool vg_complete_shadowed(const struct vg_opt *o, const struct vg_opt *own)
{
    return own != vg_global_opts && vg_opt_find_long(vg_global_opts, o->name) != NULL;
}

/* s with every '|' as sep: the words of a WORD row for a shell's list. */
static void vg_complete_words(FILE *f, const char *s, char sep)
{
    for (; *s; s++)
        fputc(*s == '|' ? sep : *s, f);
}

/* s's first line inside zsh's single quotes: ' as '\'', and each of the characters esc
 * backslashed ("[]\\" in an _arguments description, ":\\" in a _describe name). */
static void vg_complete_sq(FILE *f, const char *s, const char *esc)
{
    for (size_t i = 0; s[i] && s[i] != '\n'; i++) {
        if (s[i] == '\'')
            fputs("'\\''", f);
        else if (strchr(esc, s[i]))
            fprintf(f, "\\%c", s[i]);
        else
            fputc(s[i], f);
    }
}

/* s's first line inside fish's single quotes: \ and ' escaped. */
static void vg_complete_fish_sq(FILE *f, const char *s)
{
    for (; *s && *s != '\n'; s++) {
        if (*s == '\\' || *s == '\'')
            fputc('\\', f);
        fputc(*s, f);
    }
}

/* The listed command names, separated by sep. */
static void vg_complete_names(FILE *f, const struct vg_cmd_def *cmds, size_t n, const char *sep)
{
    const char *s = "";
    for (size_t i = 0; i < n; i++) {
        if (!cmds[i].summary)
            continue;
        fprintf(f, "%s%s", s, cmds[i].name);
        s = sep;
    }
}

/* bash: the case branches "PATTERN) ACTION ;;" for the rows of t that take a value, cmd's
 * ("*" for the global table); required: only those whose value may be the next word. */
static void vg_bash_value_cases(FILE *f, const char *cmd, const struct vg_opt *t, bool required)
{
    for (const struct vg_opt *o = t; o && o->name; o++) {
        enum vg_complete_value v = vg_complete_value(o);
        if (v == VG_CV_NONE || vg_complete_shadowed(o, t) ||
            (required && o->arg != VG_OPT_ARG_REQUIRED))
            continue;
        fprintf(f, "    %s:--%s", cmd, o->name);
        if (o->short_name)
            fprintf(f, " | %s:-%c", cmd, o->short_name);
        if (required) {
            fputs(") return 0 ;;\n", f);
            continue;
        }
        fputs(") ", f);
        if (v == VG_CV_WORDS) {
            fputs("COMPREPLY=($(compgen -W '", f);
            vg_complete_words(f, o->val.words, ' ');
            fputs("' -- \"$cur\"))", f);
        } else if (v == VG_CV_DIR) {
            fputs("COMPREPLY=($(compgen -d -- \"$cur\"))", f);
        } else if (v == VG_CV_FILE) {
            fputs("COMPREPLY=($(compgen -f -- \"$cur\"))", f);
        } else {
            fputs(":", f);
        }
        fputs(" ;;\n", f);
    }
}

/* bash: the listed options of t, space-separated. */
static void vg_bash_opts(FILE *f, const struct vg_opt *t)
{
    for (const struct vg_opt *o = t; o && o->name; o++) {
        if (!o->help || vg_complete_shadowed(o, t))
            continue;
        if (o->short_name)
            fprintf(f, " -%c", o->short_name);
        fprintf(f, " --%s", o->name);
    }
}

/* long: the script is one text with the tables' parts printed into it; it reads best whole, in
 * the order bash sees it. */
static void vg_complete_bash(FILE *f, const struct vg_cmd_def *cmds, size_t n)
{
    fputs("# bash completion for vramguard: generated by 'vramguard completion bash' from the\n"
          "# option tables its --help is made from. Installed as\n"
          "# /usr/share/bash-completion/completions/vramguard; or: source <(vramguard completion "
          "bash)\n"
          "\n"
          "# Whether option $2 of command $1 (empty before the command) takes the next word as "
          "its value.\n"
          "_vramguard_required() {\n"
          "    case \"$1:$2\" in\n",
          f);
    vg_bash_value_cases(f, "*", vg_global_opts, true);
    for (size_t i = 0; i < n; i++)
        vg_bash_value_cases(f, cmds[i].name, cmds[i].opts, true);
    fputs("    esac\n"
          "    return 1\n"
          "}\n"
          "\n"
          "# COMPREPLY for the value $cur of option $2 of command $1.\n"
          "_vramguard_value() {\n"
          "    case \"$1:$2\" in\n",
          f);
    vg_bash_value_cases(f, "*", vg_global_opts, false);
    for (size_t i = 0; i < n; i++)
        vg_bash_value_cases(f, cmds[i].name, cmds[i].opts, false);
    fputs("    esac\n"
          "    return 0\n"
          "}\n"
          "\n"
          "# The options of command $1 (empty: before the command).\n"
          "_vramguard_opts() {\n"
          "    local o='-h",
          f);
    vg_bash_opts(f, vg_global_opts);
    fputs("'\n"
          "    case $1 in\n"
          "    '') o+=' -V' ;;\n",
          f);
    for (size_t i = 0; i < n; i++) {
        if (!cmds[i].opts || !cmds[i].opts->name)
            continue;
        fprintf(f, "    %s) o+='", cmds[i].name);
        vg_bash_opts(f, cmds[i].opts);
        fputs("' ;;\n", f);
    }
    fputs("    esac\n"
          "    printf '%s\\n' \"$o\"\n"
          "}\n"
          "\n"
          "# COMPREPLY for operand $2 (0: the first) of command $1.\n"
          "_vramguard_operand() {\n"
          "    case $1 in\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const struct vg_cmd_def *c = &cmds[i];
        if (c->operands) {
            fprintf(f, "    %s) if (($2 == 0)); then COMPREPLY=($(compgen -W '", c->name);
            vg_complete_words(f, c->operands, ' ');
            fputs("' -- \"$cur\")); fi ;;\n", f);
        } else if (c->operand_commands) {
            fprintf(f, "    %s) if (($2 == 0)); then COMPREPLY=($(compgen -W '", c->name);
            vg_complete_names(f, cmds, n, " ");
            fputs("' -- \"$cur\")); fi ;;\n", f);
        } else if (c->operand_program) {
            fprintf(f,
                    "    %s) if (($2 == 0)); then COMPREPLY=($(compgen -c -- \"$cur\"));\n"
                    "        else COMPREPLY=($(compgen -f -- \"$cur\")); fi ;;\n",
                    c->name);
        }
    }
    fputs("    esac\n"
          "    return 0\n"
          "}\n"
          "\n"
          "_vramguard() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev= opt= cmd= nops=0 i w\n"
          "    COMPREPLY=()\n"
          "    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
          "    # --opt=value: bash splits it at '=' (COMP_WORDBREAKS), else it is one word\n"
          "    if [[ $cur == = ]]; then\n"
          "        opt=$prev cur=\n"
          "    elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then\n"
          "        opt=${COMP_WORDS[COMP_CWORD - 2]}\n"
          "    elif [[ $cur == --*=* ]]; then\n"
          "        opt=${cur%%=*} cur=${cur#*=}\n"
          "    fi\n"
          "    # The command: the first word that is neither an option nor an option's value.\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        w=${COMP_WORDS[i]}\n"
          "        if [[ $w == -* ]]; then\n"
          "            if [[ ${COMP_WORDS[i + 1]-} == = ]]; then\n"
          "                ((i += 2))\n"
          "            elif _vramguard_required \"$cmd\" \"$w\"; then\n"
          "                ((i += 1))\n"
          "            fi\n"
          "        elif [[ -z $cmd ]]; then\n"
          "            cmd=$w\n"
          "        else\n"
          "            ((nops += 1))\n"
          "        fi\n"
          "    done\n"
          "    if [[ -z $opt && $prev == -* ]] && _vramguard_required \"$cmd\" \"$prev\"; then\n"
          "        opt=$prev\n"
          "    fi\n"
          "    if [[ -n $opt ]]; then\n"
          "        _vramguard_value \"$cmd\" \"$opt\"\n"
          "        return 0\n"
          "    fi\n"
          "    if [[ $cur == -* ]] && ! _vramguard_program \"$cmd\" \"$nops\"; then\n"
          "        COMPREPLY=($(compgen -W \"$(_vramguard_opts \"$cmd\")\" -- \"$cur\"))\n"
          "    elif [[ -z $cmd ]]; then\n"
          "        COMPREPLY=($(compgen -W '",
          f);
    vg_complete_names(f, cmds, n, " ");
    fputs("' -- \"$cur\"))\n"
          "    else\n"
          "        _vramguard_operand \"$cmd\" \"$nops\"\n"
          "    fi\n"
          "    return 0\n"
          "}\n"
          "\n"
          "# Whether the words from operand $2 of command $1 on are a program's (run's job).\n"
          "_vramguard_program() {\n"
          "    case $1 in\n",
          f);
    for (size_t i = 0; i < n; i++)
        if (cmds[i].operand_program)
            fprintf(f, "    %s) (($2 > 0)) ;;\n", cmds[i].name);
    fputs("    *) return 1 ;;\n"
          "    esac\n"
          "}\n"
          "\n"
          "complete -F _vramguard vramguard\n",
          f);
}

/* zsh: the _arguments specs of t's rows, one a line, each in single quotes. */
static void vg_zsh_specs(FILE *f, const struct vg_opt *t, const char *indent)
{
    for (const struct vg_opt *o = t; o && o->name; o++) {
        if (!o->help || vg_complete_shadowed(o, t) || o->id == VG_OPT_HELP)
            continue;
        enum vg_complete_value v = vg_complete_value(o);
        for (int form = o->short_name ? 0 : 1; form < 2; form++) {
            fputs(indent, f);
            fputc('\'', f);
            if (form == 0)
                fprintf(f, "-%c%s", o->short_name, v == VG_CV_NONE ? "" : "+");
            else
                fprintf(f, "--%s%s", o->name,
                        v == VG_CV_NONE                 ? ""
                        : o->arg == VG_OPT_ARG_OPTIONAL ? "=-"
                                                        : "=");
            fputc('[', f);
            vg_complete_sq(f, o->help, "[]\\");
            fputc(']', f);
            if (v != VG_CV_NONE) {
                fputc(':', f);
                vg_complete_sq(f, o->metavar ? o->metavar : "VALUE", ":\\");
                fputc(':', f);
                if (v == VG_CV_WORDS) {
                    fputc('(', f);
                    vg_complete_words(f, o->val.words, ' ');
                    fputc(')', f);
                } else if (v == VG_CV_DIR) {
                    fputs("_files -/", f);
                } else if (v == VG_CV_FILE) {
                    fputs("_files", f);
                } else {
                    fputc(' ', f);
                }
            }
            fputs("'\n", f);
        }
    }
}

static void vg_complete_zsh(FILE *f, const struct vg_cmd_def *cmds, size_t n)
{
    fputs("#compdef vramguard\n"
          "# zsh completion for vramguard: generated by 'vramguard completion zsh' from the\n"
          "# option tables its --help is made from. Installed as\n"
          "# /usr/share/zsh/vendor-completions/_vramguard (a directory of $fpath).\n"
          "\n"
          "_vramguard() {\n"
          "    local curcontext=$curcontext state line ret=1\n"
          "    local -a globals commands opts\n"
          "    globals=(\n"
          "        '(- *)'{-h,--help}'[this help]'\n",
          f);
    vg_zsh_specs(f, vg_global_opts, "        ");
    fputs("    )\n"
          "    commands=(\n",
          f);
    for (size_t i = 0; i < n; i++) {
        if (!cmds[i].summary)
            continue;
        fputs("        '", f);
        vg_complete_sq(f, cmds[i].name, ":\\");
        fputc(':', f);
        vg_complete_sq(f, cmds[i].summary, "");
        fputs("'\n", f);
    }
    fputs("    )\n"
          "    _arguments -C -S $globals '(- *)-V[print the version and exit]' \\\n"
          "        '1: :->command' '*:: :->args' && ret=0\n"
          "    case $state in\n"
          "    command)\n"
          "        _describe -t commands 'vramguard command' commands && ret=0\n"
          "        ;;\n"
          "    args)\n"
          "        curcontext=${curcontext%:*:*}:vramguard-$line[1]:\n"
          "        case $line[1] in\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const struct vg_cmd_def *c = &cmds[i];
        fprintf(f, "        %s)\n            opts=(\n", c->name);
        vg_zsh_specs(f, c->opts, "                ");
        fputs("            )\n            _arguments -S $globals $opts", f);
        if (c->operands) {
            fputs(" '1:operand:(", f);
            vg_complete_words(f, c->operands, ' ');
            fputs(")'", f);
        } else if (c->operand_commands) {
            fputs(" '1:command:(", f);
            vg_complete_names(f, cmds, n, " ");
            fputs(")'", f);
        } else if (c->operand_program) {
            fputs(" '1:program:_command_names -e' '*::arguments:_normal'", f);
        }
        fputs(" && ret=0\n            ;;\n", f);
    }
    fputs("        esac\n"
          "        ;;\n"
          "    esac\n"
          "    return ret\n"
          "}\n"
          "\n"
          "_vramguard \"$@\"\n",
          f);
}

/* fish: one complete line per row of t (cond: when it applies; NULL: always). */
static void vg_fish_rows(FILE *f, const struct vg_opt *t, const char *cond)
{
    for (const struct vg_opt *o = t; o && o->name; o++) {
        if (!o->help || vg_complete_shadowed(o, t) || o->id == VG_OPT_HELP)
            continue;
        fputs("complete -c vramguard", f);
        if (cond)
            fprintf(f, " -n '%s'", cond);
        if (o->short_name)
            fprintf(f, " -s %c", o->short_name);
        fprintf(f, " -l %s", o->name);
        switch (vg_complete_value(o)) {
        case VG_CV_NONE:
            break;
        case VG_CV_WORDS:
            fputs(" -x -a '", f);
            vg_complete_words(f, o->val.words, ' ');
            fputc('\'', f);
            break;
        case VG_CV_DIR:
            fputs(" -x -a '(__fish_complete_directories (commandline -ct))'", f);
            break;
        case VG_CV_FILE:
            fputs(" -r -F", f);
            break;
        case VG_CV_FREE:
            fputs(" -x", f);
            break;
        }
        fputs(" -d '", f);
        vg_complete_fish_sq(f, o->help);
        fputs("'\n", f);
    }
}

static void vg_complete_fish(FILE *f, const struct vg_cmd_def *cmds, size_t n)
{
    fputs("# fish completion for vramguard: generated by 'vramguard completion fish' from the\n"
          "# option tables its --help is made from. Installed as\n"
          "# /usr/share/fish/vendor_completions.d/vramguard.fish\n"
          "\n"
          "complete -c vramguard -f\n"
          "complete -c vramguard -s h -l help -d 'this help'\n"
          "complete -c vramguard -n '__fish_use_subcommand' -s V -d 'print the version and exit'\n",
          f);
    vg_fish_rows(f, vg_global_opts, NULL);
    for (size_t i = 0; i < n; i++) {
        if (!cmds[i].summary)
            continue;
        fprintf(f, "complete -c vramguard -n '__fish_use_subcommand' -a %s -d '", cmds[i].name);
        vg_complete_fish_sq(f, cmds[i].summary);
        fputs("'\n", f);
    }
    for (size_t i = 0; i < n; i++) {
        const struct vg_cmd_def *c = &cmds[i];
        char cond[64];
        int w = snprintf(cond, sizeof(cond), "__fish_seen_subcommand_from %s", c->name);
        if (w < 0 || (size_t)w >= sizeof(cond))
            continue; /* a command name is short: never */
        vg_fish_rows(f, c->opts, cond);
        if (c->operands) {
            fprintf(f, "complete -c vramguard -n '%s; and __fish_is_nth_token 2' -a '", cond);
            vg_complete_words(f, c->operands, ' ');
            fputs("'\n", f);
        } else if (c->operand_commands) {
            fprintf(f, "complete -c vramguard -n '%s; and __fish_is_nth_token 2' -a '", cond);
            vg_complete_names(f, cmds, n, " ");
            fputs("'\n", f);
        } else if (c->operand_program) {
            fprintf(f, "complete -c vramguard -n '%s' -F -a '(__fish_complete_subcommand)'\n",
                    cond);
        }
    }
}

int vg_cmd_completion_script(FILE *f, const char *shell, const struct vg_cmd_def *cmds, size_t n)
{
    if (strcmp(shell, "bash") == 0)
        vg_complete_bash(f, cmds, n);
    else if (strcmp(shell, "zsh") == 0)
        vg_complete_zsh(f, cmds, n);
    else if (strcmp(shell, "fish") == 0)
        vg_complete_fish(f, cmds, n);
    else
        return -EINVAL;
    return 0;
}

int vg_cmd_completion(struct vg_global *g, int argc, char **argv, const struct vg_cmd_def *cmds,
                      size_t n)
{
    struct vg_cmd_parse p = {VG_CMD_PARSE(completion), .g = g,           .argc = argc, .argv = argv,
                             .operands = true,         .replay_ok = true};
    int c = vg_cmd_next_opt(&p);
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    if (optind + 1 != argc) {
        vg_cmd_error("completion", "%s (see 'vramguard completion --help')",
                     optind >= argc ? "which shell: bash, zsh or fish?" : "one shell only");
        return VG_EXIT_USAGE;
    }
    if (vg_cmd_completion_script(stdout, argv[optind], cmds, n)) {
        vg_cmd_error("completion", "no completion for '%s': bash, zsh or fish", argv[optind]);
        return VG_EXIT_USAGE;
    }
    if (fflush(stdout) || ferror(stdout)) {
        vg_cmd_error("completion", "cannot write the script: %s", strerror(errno));
        return VG_EXIT_SOFTWARE;
    }
    return VG_EXIT_OK;
}
