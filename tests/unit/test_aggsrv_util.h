/* Helpers shared by the tests that start the real aggregation-server
 * binary (test_aggsrv_e2e, test_aggsrv_fedpower_e2e): the process, an HTTP
 * client and a request call. The including test sets g_bin (the binary)
 * and g_root (its temp directory, holding admin.tok) before server_start. */
#ifndef FS_TEST_AGGSRV_UTIL_H
#define FS_TEST_AGGSRV_UTIL_H

#include "net/http_client.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_bin[PATH_MAX];
static char g_root[512]; /* temp dir of this run */
static int g_have_bin;

struct server {
    pid_t pid;
    uint16_t port;
    char url[64];
    char data[PATH_MAX];
    char extra[4][64];
    int nextra;
};

static inline void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline int server_start(struct server *s)
{
    char portfile[PATH_MAX + 16];
    char tok[PATH_MAX + 16];
    char log[PATH_MAX + 16];
    pid_t pid;

    snprintf(portfile, sizeof portfile, "%s/port", s->data);
    snprintf(tok, sizeof tok, "%s/admin.tok", g_root);
    snprintf(log, sizeof log, "%s.log", s->data);
    (void)unlink(portfile);
    pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        char *argv[24];
        int a = 0;
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        argv[a++] = g_bin;
        argv[a++] = (char *)"--listen";
        argv[a++] = (char *)"127.0.0.1:0";
        argv[a++] = (char *)"--data-dir";
        argv[a++] = s->data;
        argv[a++] = (char *)"--admin-token-file";
        argv[a++] = tok;
        argv[a++] = (char *)"--port-file";
        argv[a++] = portfile;
        argv[a++] = (char *)"--log-level";
        argv[a++] = (char *)"warn";
        for (int i = 0; i < s->nextra; i++) {
            argv[a++] = s->extra[i];
        }
        argv[a] = NULL;
        execv(g_bin, argv);
        _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 400; i++) {
        FILE *f = fopen(portfile, "r");
        if (f != NULL) {
            unsigned p = 0;
            int ok = fscanf(f, "%u", &p) == 1;
            fclose(f);
            if (ok && p > 0 && p < 65536) {
                s->port = (uint16_t)p;
                snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u", p);
                return 0;
            }
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            s->pid = 0;
            return -1;
        }
        sleep_ms(25);
    }
    return -1;
}

/* Stop with sig; returns the exit status (or 128+signal). */
static inline int server_stop(struct server *s, int sig)
{
    int st = 0;

    if (s->pid <= 0) {
        return -1;
    }
    kill(s->pid, sig);
    waitpid(s->pid, &st, 0);
    s->pid = 0;
    if (WIFEXITED(st)) {
        return WEXITSTATUS(st);
    }
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static inline fs_httpc *client(const struct server *s, const char *token)
{
    struct fs_httpc_config c;
    struct fs_err err = {0};
    fs_httpc *h = NULL;

    fs_httpc_config_default(&c);
    c.base_url = s->url;
    c.token = token;
    c.max_retries = 2;
    c.backoff_base_ms = 50;
    c.timeout_ms = 30000;
    if (fs_httpc_new(&h, &c, &err) != 0) {
        fprintf(stderr, "  httpc: %s\n", err.msg);
    }
    return h;
}

/* One request; returns the status (0 on transport failure), *out the JSON body if any. */
static inline long call(fs_httpc *h, const char *method, const char *path, const char *ctype,
                        const void *body, size_t len, json_t **out)
{
    struct fs_httpc_req rq;
    struct fs_httpc_resp resp;
    struct fs_err err = {0};
    long st;

    memset(&rq, 0, sizeof rq);
    memset(&resp, 0, sizeof resp);
    rq.method = method;
    rq.path = path;
    rq.content_type = ctype;
    rq.body = body;
    rq.body_len = len;
    if (out != NULL) {
        *out = NULL;
    }
    if (fs_httpc_do(h, &rq, &resp, &err) != 0) {
        fprintf(stderr, "  %s %s: %s\n", method, path, err.msg);
        fs_httpc_resp_clear(&resp);
        return 0;
    }
    st = resp.status;
    if (out != NULL && resp.body != NULL) {
        json_error_t je;
        *out = json_loadb(resp.body, resp.len, 0, &je);
    }
    fs_httpc_resp_clear(&resp);
    return st;
}

static inline long call_json(fs_httpc *h, const char *method, const char *path, const json_t *body,
                             json_t **out)
{
    char *s = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    long st = call(h, method, path, body != NULL ? "application/json" : NULL, s,
                   s != NULL ? strlen(s) : 0, out);
    free(s);
    return st;
}

/* The problem code of a reply body, or "". */
static inline const char *pcode(const json_t *j)
{
    const char *c = json_string_value(json_object_get(j, "code"));
    return c != NULL ? c : "";
}

/* Find bin/aggregation-server next to the test binary (argv0), make the temp
 * directory g_root from `tmpl` and write the admin token there. Returns 0,
 * or -1 (with a message) when the directory cannot be made. */
static inline int aggsrv_test_setup(const char *argv0, const char *tmpl, const char *admin_token)
{
    char dir[2048];
    char tok[PATH_MAX + 16];
    char *slash;
    FILE *f;

    snprintf(dir, sizeof dir, "%s", argv0);
    slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    snprintf(g_bin, sizeof g_bin, "%s/../bin/aggregation-server", dir);
    g_have_bin = access(g_bin, X_OK) == 0;
    if (!g_have_bin) {
        printf("note: %s not built; skipping the end-to-end cases\n", g_bin);
    }
    snprintf(g_root, sizeof g_root, "%s", tmpl);
    if (mkdtemp(g_root) == NULL) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    snprintf(tok, sizeof tok, "%s/admin.tok", g_root);
    f = fopen(tok, "w");
    if (f != NULL) {
        fprintf(f, "%s\n", admin_token);
        fclose(f);
        chmod(tok, 0600);
    }
    return 0;
}

#endif
