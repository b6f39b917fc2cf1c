/* fedsvd dp calibrate|convert: Gaussian-mechanism calibration and zCDP
 * conversion, thin wrappers over lib/dp for operators and scripts. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dp/dp.h"

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

static void dp_help(void)
{
    printf("Usage: fedsvd dp SUBCOMMAND [OPTIONS]\n"
           "\n"
           "Differential-privacy arithmetic for the Gaussian mechanism.\n"
           "\n"
           "Subcommands:\n"
           "  calibrate   the noise sigma for a target (epsilon, delta)\n"
           "  convert     the epsilon of a zCDP guarantee rho at a given delta\n"
           "\n"
           "Run 'fedsvd dp SUBCOMMAND --help' for the options of each.\n");
}

static void calibrate_help(void)
{
    printf("Usage: fedsvd dp calibrate --epsilon E --delta D [--sensitivity S]\n"
           "                           [--method analytic|classic|zcdp] [--releases T]\n"
           "                           [--format text|json]\n"
           "\n"
           "Print the smallest Gaussian noise standard deviation sigma that makes a release\n"
           "of L2 sensitivity S (epsilon, delta)-differentially private.\n"
           "\n"
           "Options:\n"
           "  --epsilon E        target epsilon, > 0\n"
           "  --delta D          target delta, 0 < D < 1\n"
           "  --sensitivity S    L2 sensitivity of one release (default 1)\n"
           "  --method M         analytic: Balle & Wang 2018, exact (default)\n"
           "                     classic: S*sqrt(2 ln(1.25/D))/E, only valid for E < 1\n"
           "                     zcdp: per-release sigma so that T releases composed in zCDP\n"
           "                     convert (optimally) to (E, D)\n"
           "  --releases T       number of releases composed (zcdp only, default 1)\n"
           "  --format F         text (default: sigma alone on stdout) or json (one object:\n"
           "                     sigma, epsilon, delta, sensitivity, method, rho, valid)\n"
           "  -h, --help         show this text\n"
           "\n"
           "Example: fedsvd dp calibrate --epsilon 1 --delta 1e-5   prints 3.730631...\n");
}

static void convert_help(void)
{
    printf("Usage: fedsvd dp convert (--rho R | --sigma SIGMA [--sensitivity S] [--releases T])\n"
           "                         --delta D [--method optimal|simple] [--format text|json]\n"
           "\n"
           "Print the epsilon of a rho-zCDP guarantee at the given delta.\n"
           "\n"
           "Options:\n"
           "  --rho R            total zCDP parameter, > 0\n"
           "  --sigma SIGMA      instead of --rho: T Gaussian releases of sensitivity S with\n"
           "                     noise SIGMA give rho = T*S^2/(2 SIGMA^2)\n"
           "  --sensitivity S    with --sigma (default 1)\n"
           "  --releases T       with --sigma (default 1)\n"
           "  --delta D          0 < D < 1\n"
           "  --method M         optimal: Canonne, Kamath & Steinke 2020 (default)\n"
           "                     simple: rho + 2 sqrt(rho ln(1/D))\n"
           "  --format F         text (default: epsilon alone on stdout) or json\n"
           "  -h, --help         show this text\n"
           "\n"
           "Example: fedsvd dp convert --rho 0.03125 --delta 1e-3   prints 0.6880024...\n");
}

static int dp_calibrate(int argc, char **argv)
{
    const char *cmd = "dp calibrate";
    const char *s_eps = NULL, *s_delta = NULL, *s_sens = NULL, *s_method = NULL;
    const char *s_rel = NULL, *s_format = NULL;
    struct cli_opt opts[] = {
        {"epsilon", CLI_OPT_VALUE, &s_eps, NULL},      {"delta", CLI_OPT_VALUE, &s_delta, NULL},
        {"sensitivity", CLI_OPT_VALUE, &s_sens, NULL}, {"method", CLI_OPT_VALUE, &s_method, NULL},
        {"releases", CLI_OPT_VALUE, &s_rel, NULL},     {"format", CLI_OPT_VALUE, &s_format, NULL},
    };
    const char *pos[1];
    size_t npos = 0;
    size_t releases = 1;
    double eps = 0, delta = 0, sens = 1, sigma = 0;
    int help = 0, json = 0, valid = 1;
    const char *method = "analytic";
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        calibrate_help();
        return CLI_OK;
    }
    if (s_eps == NULL || s_delta == NULL) {
        return cli_usage_error(cmd, "--epsilon and --delta are required");
    }
    if ((rc = cli_parse_double(cmd, "--epsilon", s_eps, 0, CLI_OPEN, 0, CLI_NONE, &eps)) != 0 ||
        (rc = cli_parse_double(cmd, "--delta", s_delta, 0, CLI_OPEN, 1, CLI_OPEN, &delta)) != 0 ||
        (s_sens != NULL && (rc = cli_parse_double(cmd, "--sensitivity", s_sens, 0, CLI_OPEN, 0,
                                                  CLI_NONE, &sens)) != 0) ||
        (rc = cli_parse_format(cmd, s_format, &json)) != 0) {
        return rc;
    }
    if (s_method != NULL) {
        if (strcmp(s_method, "analytic") != 0 && strcmp(s_method, "classic") != 0 &&
            strcmp(s_method, "zcdp") != 0) {
            return cli_usage_error(cmd, "--method: expected analytic, classic or zcdp, got '%s'",
                                   s_method);
        }
        method = s_method;
    }
    if (s_rel != NULL) {
        if (strcmp(method, "zcdp") != 0) {
            return cli_usage_error(cmd, "--releases applies only to --method zcdp");
        }
        if ((rc = cli_parse_size(cmd, "--releases", s_rel, 1, 1000000000u, &releases)) != 0) {
            return rc;
        }
    }

    if (strcmp(method, "classic") == 0) {
        rc = fs_dp_sigma_classic(eps, delta, sens, &sigma, &valid, &err);
    } else if (strcmp(method, "zcdp") == 0) {
        rc = fs_zcdp_sigma_for(eps, delta, sens, (unsigned)releases, &sigma, &err);
    } else {
        rc = fs_dp_sigma_analytic(eps, delta, sens, &sigma, &err);
    }
    if (rc != 0) {
        return cli_fs_error(cmd, &err);
    }
    if (!valid) {
        fprintf(stderr,
                "fedsvd %s: warning: the classic calibration is only proven for epsilon < 1; "
                "sigma %.10g does not guarantee (%g, %g)-DP (use --method analytic)\n",
                cmd, sigma, eps, delta);
    }
    if (json) {
        json_t *o =
            json_pack("{s:o, s:o, s:o, s:o, s:s, s:o, s:b}", "sigma", cli_json_num(sigma),
                      "epsilon", cli_json_num(eps), "delta", cli_json_num(delta), "sensitivity",
                      cli_json_num(sens), "method", method, "rho",
                      cli_json_num((double)releases * fs_zcdp_rho(sens, sigma)), "valid", valid);
        if (o != NULL && strcmp(method, "zcdp") == 0) {
            json_object_set_new(o, "releases", json_integer((json_int_t)releases));
        }
        return cli_print_json(cmd, o);
    }
    printf("%.10g\n", sigma);
    return CLI_OK;
}

static int dp_convert(int argc, char **argv)
{
    const char *cmd = "dp convert";
    const char *s_rho = NULL, *s_delta = NULL, *s_method = NULL, *s_format = NULL;
    const char *s_sigma = NULL, *s_sens = NULL, *s_rel = NULL;
    struct cli_opt opts[] = {
        {"rho", CLI_OPT_VALUE, &s_rho, NULL},       {"delta", CLI_OPT_VALUE, &s_delta, NULL},
        {"method", CLI_OPT_VALUE, &s_method, NULL}, {"format", CLI_OPT_VALUE, &s_format, NULL},
        {"sigma", CLI_OPT_VALUE, &s_sigma, NULL},   {"sensitivity", CLI_OPT_VALUE, &s_sens, NULL},
        {"releases", CLI_OPT_VALUE, &s_rel, NULL},
    };
    const char *pos[1];
    size_t npos = 0;
    size_t releases = 1;
    double rho = 0, delta = 0, eps = 0, sigma = 0, sens = 1;
    int help = 0, json = 0;
    const char *method = "optimal";
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        convert_help();
        return CLI_OK;
    }
    if ((s_rho == NULL) == (s_sigma == NULL)) {
        return cli_usage_error(cmd, "give exactly one of --rho or --sigma");
    }
    if (s_delta == NULL) {
        return cli_usage_error(cmd, "--delta is required");
    }
    if (s_rho != NULL && (s_sens != NULL || s_rel != NULL)) {
        return cli_usage_error(cmd, "--sensitivity and --releases apply only with --sigma");
    }
    if ((rc = cli_parse_double(cmd, "--delta", s_delta, 0, CLI_OPEN, 1, CLI_OPEN, &delta)) != 0 ||
        (rc = cli_parse_format(cmd, s_format, &json)) != 0) {
        return rc;
    }
    if (s_rho != NULL) {
        if ((rc = cli_parse_double(cmd, "--rho", s_rho, 0, CLI_OPEN, 0, CLI_NONE, &rho)) != 0) {
            return rc;
        }
    } else {
        if ((rc = cli_parse_double(cmd, "--sigma", s_sigma, 0, CLI_OPEN, 0, CLI_NONE, &sigma)) !=
                0 ||
            (s_sens != NULL && (rc = cli_parse_double(cmd, "--sensitivity", s_sens, 0, CLI_OPEN, 0,
                                                      CLI_NONE, &sens)) != 0) ||
            (s_rel != NULL &&
             (rc = cli_parse_size(cmd, "--releases", s_rel, 1, 1000000000u, &releases)) != 0)) {
            return rc;
        }
        rho = (double)releases * fs_zcdp_rho(sens, sigma);
    }
    if (s_method != NULL) {
        if (strcmp(s_method, "optimal") != 0 && strcmp(s_method, "simple") != 0) {
            return cli_usage_error(cmd, "--method: expected optimal or simple, got '%s'", s_method);
        }
        method = s_method;
    }
    if (strcmp(method, "simple") == 0) {
        rc = fs_zcdp_eps_simple(rho, delta, &eps, &err);
    } else {
        rc = fs_zcdp_eps_optimal(rho, delta, &eps, &err);
    }
    if (rc != 0) {
        return cli_fs_error(cmd, &err);
    }
    if (json) {
        json_t *o = json_pack("{s:o, s:o, s:o, s:s}", "epsilon", cli_json_num(eps), "rho",
                              cli_json_num(rho), "delta", cli_json_num(delta), "method", method);
        return cli_print_json(cmd, o);
    }
    printf("%.10g\n", eps);
    return CLI_OK;
}

int cmd_dp(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "fedsvd dp: missing SUBCOMMAND, calibrate or convert (see 'fedsvd dp "
                        "--help')\n");
        return CLI_EUSAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        dp_help();
        return CLI_OK;
    }
    if (strcmp(argv[1], "calibrate") == 0) {
        return dp_calibrate(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "convert") == 0) {
        return dp_convert(argc - 1, argv + 1);
    }
    fprintf(stderr, "fedsvd dp: unknown subcommand '%s' (see 'fedsvd dp --help')\n", argv[1]);
    return CLI_EUSAGE;
}
