/* The dashboard's files, embedded with the assembler's .incbin (paths
 * relative to the repository root, where make runs the compiler; the
 * Makefile makes this object depend on the files). */
#include "dashboard.h"

#include <stdint.h>

/* clang-format off */
#define ASSET(sym, file)                                                          \
    ".balign 16\n.globl " sym "\n" sym ":\n.incbin \"" file "\"\n" sym "_end:\n" \
    ".balign 8\n.globl " sym "_len\n" sym "_len: .quad " sym "_end - " sym "\n"
#define DIR "services/aggregation-server/dashboard/"

__asm__(".section .rodata\n"
        ASSET("agg_dash_html", DIR "index.html")
        ASSET("agg_dash_js", DIR "dashboard.js")
        ASSET("agg_dash_css", DIR "dashboard.css")
        ASSET("agg_dash_icon", DIR "favicon.svg")
        ".previous\n");
/* clang-format on */

extern const unsigned char agg_dash_html[], agg_dash_js[], agg_dash_css[], agg_dash_icon[];
extern const uint64_t agg_dash_html_len, agg_dash_js_len, agg_dash_css_len, agg_dash_icon_len;

const char *const AGG_DASHBOARD_HEADERS[] = {
    "Content-Security-Policy",
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options",
    "nosniff",
    "Referrer-Policy",
    "no-referrer",
    "X-Frame-Options",
    "DENY",
    "Cross-Origin-Opener-Policy",
    "same-origin",
    "Cache-Control",
    "no-store",
    NULL};

void agg_dashboard_asset(enum agg_asset_id id, struct agg_asset *out)
{
    switch (id) {
    case AGG_ASSET_JS:
        *out = (struct agg_asset){"text/javascript; charset=utf-8", agg_dash_js,
                                  (size_t)agg_dash_js_len};
        break;
    case AGG_ASSET_CSS:
        *out =
            (struct agg_asset){"text/css; charset=utf-8", agg_dash_css, (size_t)agg_dash_css_len};
        break;
    case AGG_ASSET_ICON:
        *out = (struct agg_asset){"image/svg+xml", agg_dash_icon, (size_t)agg_dash_icon_len};
        break;
    default:
        *out = (struct agg_asset){"text/html; charset=utf-8", agg_dash_html,
                                  (size_t)agg_dash_html_len};
        break;
    }
}
