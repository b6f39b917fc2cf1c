/* The dashboard: a static page (index.html, dashboard.js, dashboard.css and
 * favicon.svg of services/aggregation-server/dashboard/, compiled into the
 * binary) served at /, /dashboard.js, /dashboard.css and /favicon.svg. The page reads the admin API
 * (GET /v1/jobs, GET /v1/jobs/{job}, GET /v1/jobs/{job}/result,
 * DELETE /v1/jobs/{job}) with the token the user typed, kept in the tab's
 * sessionStorage; see docs/dashboard.md. */
#ifndef AGGSRV_DASHBOARD_H
#define AGGSRV_DASHBOARD_H

#include <stddef.h>

struct agg_asset {
    const char *content_type;
    const unsigned char *data;
    size_t len;
};

enum agg_asset_id { AGG_ASSET_HTML = 0, AGG_ASSET_JS, AGG_ASSET_CSS, AGG_ASSET_ICON };

/* The file of the dashboard with that id. */
void agg_dashboard_asset(enum agg_asset_id id, struct agg_asset *out);

/* Headers every dashboard response carries: a Content-Security-Policy that
 * allows only this origin's script, style and API calls (no inline code, no
 * framing), nosniff, no referrer. NULL-terminated name/value pairs. */
extern const char *const AGG_DASHBOARD_HEADERS[];

#endif
