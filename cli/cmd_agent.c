/* fedsvd agent identity: the fingerprint of a client-agent's identity key,
 * which the party's operator hands to job creators so that they pin it
 * (`fedsvd job create --party-key I:FINGERPRINT`). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "crypto/ct.h"
#include "crypto/ed25519.h"
#include "orch.h"

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

static void agent_help(void)
{
    printf("Usage: fedsvd agent SUBCOMMAND [OPTIONS]\n"
           "\n"
           "Talk to a client-agent as its operator.\n"
           "\n"
           "Subcommands:\n"
           "  identity   print the fingerprint of the agent's identity key\n"
           "\n"
           "Run 'fedsvd agent SUBCOMMAND --help' for the options of each.\n");
}

static void identity_help(void)
{
    printf("Usage: fedsvd agent identity --agent URL --token-file F [--insecure] [--ca-file F]\n"
           "                             [--format text|json]\n"
           "       fedsvd agent identity --data-dir DIR [--format text|json]\n"
           "\n"
           "Print the fingerprint of a client-agent's identity: the 64 hex digits of its\n"
           "Ed25519 public key (GET /v1/identity on the agent's operator API, or read from\n"
           "the agent's DIR/identity.key). Send it to the job creator, who pins it with\n"
           "'fedsvd job create --party-key I:FINGERPRINT'; the agents and the aggregation\n"
           "server of that job then refuse any other key for party I.\n"
           "\n"
           "Options:\n");
    orch_agent_help();
    printf("  --data-dir DIR         read DIR/identity.key instead (on the agent's machine)\n"
           "  --format F             text (default: the fingerprint alone) or json\n"
           "                         ({\"algorithm\": \"ed25519\", \"fingerprint\": ...})\n"
           "  -h, --help             show this text\n");
}

/* The public key of data_dir/identity.key (32 raw bytes, the private seed). */
static int identity_from_dir(const char *cmd, const char *dir, uint8_t pk[FS_ED25519_KEY_LEN])
{
    char path[4096];
    uint8_t sk[FS_ED25519_KEY_LEN];
    uint8_t extra;
    struct stat sb;
    struct fs_err err;
    ssize_t got;
    int fd;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (cli_path_join(cmd, path, sizeof path, dir, "identity.key") != CLI_OK) {
        return CLI_ERUNTIME;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return cli_runtime_error(cmd, "%s: cannot open: %s", path, strerror(errno));
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        rc = cli_runtime_error(cmd, "%s: not a regular file", path);
    } else {
        got = read(fd, sk, sizeof sk);
        if (got != (ssize_t)sizeof sk || read(fd, &extra, 1) != 0) {
            rc = cli_runtime_error(cmd, "%s: expected exactly 32 bytes", path);
        } else if (fs_ed25519_public(pk, sk, &err) != 0) {
            rc = cli_fs_error(cmd, &err);
        }
    }
    close(fd);
    fs_wipe(sk, sizeof sk);
    return rc;
}

static int agent_identity(int argc, char **argv)
{
    const char *cmd = "agent identity";
    const char *s_dir = NULL;
    struct orch_agent_opts ao;
    struct cli_opt opts[] = {
        ORCH_AGENT_OPTS(ao),
        {"data-dir", CLI_OPT_VALUE, &s_dir, NULL},
    };
    char fpr[ORCH_FPR_LEN + 1];
    const char *pos[1];
    size_t npos = 0;
    int help = 0, rc;
    struct fs_err err;

    fs_err_clear(&err);
    memset(&ao, 0, sizeof ao);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        identity_help();
        return CLI_OK;
    }
    if ((rc = cli_parse_format(cmd, ao.format, &ao.json)) != CLI_OK) {
        return rc;
    }
    if ((s_dir == NULL) == (ao.url == NULL)) {
        return cli_usage_error(cmd, "give either --agent URL (with --token-file) or --data-dir");
    }
    if (s_dir != NULL) {
        uint8_t pk[FS_ED25519_KEY_LEN];
        if (ao.token_file != NULL || ao.ca_file != NULL || ao.tls.insecure) {
            return cli_usage_error(cmd, "--token-file, --ca-file and --insecure go with --agent");
        }
        if ((rc = identity_from_dir(cmd, s_dir, pk)) != CLI_OK) {
            return rc;
        }
        fs_ed25519_fpr_format(pk, fpr);
    } else {
        fs_httpc *c = NULL;
        if ((rc = orch_agent_connect(cmd, &ao, 10000, 2, &c)) != CLI_OK) {
            return rc;
        }
        rc = orch_agent_identity(c, fpr, &err);
        fs_httpc_free(c);
        if (rc != 0) {
            return cli_fs_error(cmd, &err);
        }
    }
    if (ao.json) {
        return cli_print_json(cmd,
                              json_pack("{s:s, s:s}", "algorithm", "ed25519", "fingerprint", fpr));
    }
    printf("%s\n", fpr);
    return CLI_OK;
}

int cmd_agent(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "fedsvd agent: missing SUBCOMMAND: identity (see 'fedsvd agent --help')\n");
        return CLI_EUSAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        agent_help();
        return CLI_OK;
    }
    if (strcmp(argv[1], "identity") == 0) {
        return agent_identity(argc - 1, argv + 1);
    }
    fprintf(stderr, "fedsvd agent: unknown subcommand '%s' (see 'fedsvd agent --help')\n", argv[1]);
    return CLI_EUSAGE;
}
