/* fedsvd: the command-line tool. This file only dispatches to the commands;
 * each command lives in cli/cmd_<name>.c and prints its own --help. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_lsa.h"
#include "core/version.h"
#include "local.h"

/* fedsvd local: the power methods have options of their own. */
static int run_local(int argc, char **argv)
{
    return local_is_power(argc, argv) ? cmd_local_power(argc, argv) : cmd_local(argc, argv);
}

/* fedsvd job create --algorithm lsa: two jobs and the sites' invitation files. */
static int run_job(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "create") == 0 && cmd_lsa_job_requested(argc - 1, argv + 1)) {
        return cmd_lsa_job_create(argc - 1, argv + 1);
    }
    return cmd_job(argc, argv);
}

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"svd", cmd_svd, "centralised SVD of one matrix (the baseline for federated results)"},
    {"dp", cmd_dp, "differential privacy: calibrate Gaussian noise, convert zCDP to (eps, delta)"},
    {"gen", cmd_gen, "generate synthetic data (.npy/.csv/.mtx), optionally split into parties"},
    {"compare", cmd_compare, "compare two results: singular values, subspaces, matrices"},
    {"convert", cmd_convert, "convert a matrix file between npy, csv and MatrixMarket"},
    {"sum", cmd_sum, "add matrices elementwise (the reference for secure-sum results)"},
    {"job", run_job, "create jobs and invitations, watch progress, fetch results (needs a server)"},
    {"local", run_local, "run a whole federated job on this machine with real services"},
    {"agent", cmd_agent, "a client-agent's identity fingerprint, to pin in jobs"},
    {"join", cmd_join, "join a job: hand an invitation and the site's dataset to its agent"},
    {"participation", cmd_participation, "a site's participations: list, status, result files"},
    {"plot", cmd_plot, "write SVG figures: PCA scatter by class, scree, convergence lines"},
    {"lsa", cmd_lsa, "federated latent semantic analysis of text held by several parties"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void print_usage(FILE *f)
{
    fprintf(f, "Usage: fedsvd COMMAND [OPTIONS]\n"
               "\n"
               "Privacy-preserving federated SVD: offline tools, jobs on servers, local runs.\n"
               "\n"
               "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(f, "  %-13s %s\n", "help", "show this text, or 'fedsvd help COMMAND' for one command");
    fprintf(f, "\n"
               "Options:\n"
               "  -h, --help     show this text\n"
               "  --version      print the version\n"
               "\n"
               "Every command accepts --help. Input matrices may be .npy, CSV, MatrixMarket or\n"
               "IDX files (--input-format auto|npy|csv|mtx|idx). Exit status: 0 ok, 1 runtime\n"
               "error (file, format, numeric), 2 usage error.\n");
}

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

/* `fedsvd help [COMMAND [SUB]]` is `fedsvd COMMAND [SUB] --help`. */
static int run_help(int argc, char **argv)
{
    const struct command *c;
    char *sub_argv[4];
    char help[] = "--help";
    int n = 0;

    if (argc < 2) {
        print_usage(stdout);
        return CLI_OK;
    }
    c = find_command(argv[1]);
    if (c == NULL) {
        fprintf(stderr, "fedsvd help: unknown command '%s' (see 'fedsvd --help')\n", argv[1]);
        return CLI_EUSAGE;
    }
    if (argc > 3) {
        fprintf(stderr, "fedsvd help: too many arguments (see 'fedsvd --help')\n");
        return CLI_EUSAGE;
    }
    sub_argv[n++] = argv[1];
    if (argc == 3) {
        sub_argv[n++] = argv[2];
    }
    sub_argv[n++] = help;
    sub_argv[n] = NULL;
    return c->run(n, sub_argv);
}

int main(int argc, char **argv)
{
    const struct command *c;
    int rc;

    if (argc < 2) {
        print_usage(stderr);
        return CLI_EUSAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("fedsvd %s\n", fs_version_string());
        return CLI_OK;
    }
    if (strcmp(argv[1], "help") == 0) {
        return run_help(argc - 1, argv + 1);
    }
    c = find_command(argv[1]);
    if (c == NULL) {
        if (argv[1][0] == '-') {
            fprintf(stderr, "fedsvd: unknown option '%s' (see 'fedsvd --help')\n", argv[1]);
        } else {
            fprintf(stderr, "fedsvd: unknown command '%s' (see 'fedsvd --help')\n", argv[1]);
        }
        return CLI_EUSAGE;
    }
    rc = c->run(argc - 1, argv + 1);
    if (fflush(stdout) != 0 && rc == CLI_OK) {
        fprintf(stderr, "fedsvd %s: cannot write to standard output\n", argv[1]);
        rc = CLI_ERUNTIME;
    }
    return rc;
}
