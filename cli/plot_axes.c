/* Text, name lists and axes of the `fedsvd plot` figures (cmd_plot.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plot_axes.h"

/* ---- text ---- */

/* Length of the valid UTF-8 sequence at p, 0 if the bytes there are not one
 * (overlong forms and surrogates included), so the output stays valid XML. */
static size_t utf8_seq(const unsigned char *p)
{
    if (p[0] < 0x80) {
        return 1;
    }
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (p[0] >= 0xe0 && p[0] <= 0xef) {
        unsigned lo = p[0] == 0xe0 ? 0xa0 : 0x80;
        unsigned hi = p[0] == 0xed ? 0x9f : 0xbf;
        return (p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80) ? 3 : 0;
    }
    if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        unsigned lo = p[0] == 0xf0 ? 0x90 : 0x80;
        unsigned hi = p[0] == 0xf4 ? 0x8f : 0xbf;
        return (p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80) ? 4 : 0;
    }
    return 0;
}

/* Write s as XML character data / attribute text: markup characters become
 * entities, control characters (not allowed in XML 1.0) spaces, and invalid
 * UTF-8 bytes U+FFFD. At most max_chars characters; a longer s is cut and
 * ends in an ellipsis. */
void cli_svg_put_esc_max(FILE *f, const char *s, size_t max_chars)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t chars = 0;

    while (*p != '\0') {
        size_t n = utf8_seq(p);

        if (++chars == max_chars && p[n > 0 ? n : 1] != '\0') {
            fputs("\xe2\x80\xa6", f);
            break;
        }
        if (n == 0) {
            fputs("\xef\xbf\xbd", f);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
            continue;
        }
        switch (*p) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            fputc(*p < 0x20 || *p == 0x7f ? ' ' : *p, f);
            break;
        }
        p++;
    }
}

void cli_svg_put_esc(FILE *f, const char *s)
{
    cli_svg_put_esc_max(f, s, SIZE_MAX);
}

/* Estimated rendered width in px of s at font size `size` (characters, not bytes). */
double cli_svg_text_px(const char *s, double size)
{
    size_t chars = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        chars += (*p & 0xc0) != 0x80;
    }
    return 0.6 * size * (double)chars;
}

/* ---- name lists ("T-shirt,Trouser,...") ---- */

void cli_plot_names_free(struct cli_plot_names *nm)
{
    free(nm->item);
    free(nm->buf);
    nm->item = NULL;
    nm->buf = NULL;
    nm->n = 0;
}

int cli_plot_names_parse(const char *cmd, const char *flag, const char *s,
                         struct cli_plot_names *nm)
{
    size_t count = 1;

    memset(nm, 0, sizeof *nm);
    if (s == NULL) {
        return CLI_OK;
    }
    for (const char *p = s; *p != '\0'; p++) {
        count += *p == ',';
    }
    if (count > PLOT_MAX_NAMES) {
        return cli_usage_error(cmd, "%s: more than %d names", flag, PLOT_MAX_NAMES);
    }
    nm->buf = strdup(s);
    nm->item = calloc(count, sizeof *nm->item);
    if (nm->buf == NULL || nm->item == NULL) {
        cli_plot_names_free(nm);
        return cli_runtime_error(cmd, "out of memory");
    }
    nm->item[0] = nm->buf;
    for (char *p = nm->buf; *p != '\0'; p++) {
        if (*p == ',') {
            *p = '\0';
            nm->item[++nm->n] = p + 1;
        }
    }
    nm->n = count;
    return CLI_OK;
}

/* ---- axes ---- */

/* 1, 2 or 5 times a power of ten, at least range/target. */
static double nice_step(double range, double target)
{
    double raw = range / target;
    double mag = pow(10.0, floor(log10(raw)));
    double norm = raw / mag;

    if (norm <= 1.0) {
        return mag;
    }
    if (norm <= 2.0) {
        return 2.0 * mag;
    }
    if (norm <= 5.0) {
        return 5.0 * mag;
    }
    return 10.0 * mag;
}

/* One number format for the whole axis, so "0.5" and "1.0" never mix with "1e-05". */
static void label_ticks(struct cli_plot_axis *a, double step)
{
    double big = 0.0;
    int dec = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
    int general, prec;

    for (size_t i = 0; i < a->nt; i++) {
        big = fmax(big, fabs(a->t[i]));
    }
    general = big >= 1e6 || dec > 5;
    /* Enough significant digits that neighbouring ticks differ (1000000.1 vs 1000000.2). */
    prec = big > step ? (int)ceil(log10(big / step) - 1e-9) + 1 : 1;
    prec = prec < 1 ? 1 : prec > 17 ? 17 : prec;
    for (size_t i = 0; i < a->nt; i++) {
        if (general) {
            snprintf(a->lab[i], sizeof a->lab[i], "%.*g", prec, a->t[i]);
        } else {
            snprintf(a->lab[i], sizeof a->lab[i], "%.*f", dec, a->t[i]);
        }
    }
}

/* Linear axis over [lo, hi] (already padded) with about `target` ticks; the
 * step is at least min_step (1 for row indices). */
void cli_plot_axis_linear(struct cli_plot_axis *a, double lo, double hi, double target,
                          double min_step)
{
    double step;
    double first;

    memset(a, 0, sizeof *a);
    if (!(hi > lo)) {
        double pad = lo != 0.0 ? 0.1 * fabs(lo) : 1.0;
        lo -= pad;
        hi += pad;
    }
    a->lo = lo;
    a->hi = hi;
    step = fmax(nice_step(hi - lo, target), min_step);
    first = ceil(lo / step - 1e-9);
    for (size_t k = 0; a->nt < PLOT_MAX_TICKS; k++) {
        double v = (first + (double)k) * step;
        if (v > hi + 1e-9 * step) {
            break;
        }
        /* -0 and 1e-17 (accumulated rounding) both print as "0". */
        a->t[a->nt++] = fabs(v) < 1e-9 * step ? 0.0 : v;
    }
    label_ticks(a, step);
}

/* Component numbers 1..m as categories at integer positions. */
void cli_plot_axis_components(struct cli_plot_axis *a, size_t m)
{
    size_t step = (size_t)nice_step((double)m, 10.0);

    memset(a, 0, sizeof *a);
    a->lo = 0.5;
    a->hi = (double)m + 0.5;
    if (step < 1) {
        step = 1;
    }
    /* 1, 5, 10, 15 ... reads well; 1, 2, 4, 6 does not, so step 2 gives 1, 3, 5 ... */
    for (size_t v = 1; v <= m && a->nt < PLOT_MAX_TICKS;
         v = (v == 1 && step > 2) ? step : v + step) {
        a->t[a->nt] = (double)v;
        snprintf(a->lab[a->nt], sizeof a->lab[a->nt], "%zu", v);
        a->nt++;
    }
}

/* Log axis covering [minv, maxv] (both > 0) with whole decades at the ends. */
void cli_plot_axis_log(struct cli_plot_axis *a, double minv, double maxv)
{
    double lo = floor(log10(minv));
    double hi = ceil(log10(maxv));
    double every;
    int plain;

    memset(a, 0, sizeof *a);
    a->log = 1;
    if (hi <= lo) {
        hi = lo + 1.0;
    }
    a->lo = lo;
    a->hi = hi;
    every = ceil((hi - lo) / 10.0);
    /* Plain numbers (0.001 ... 10000) when they all fit, else 1eN for every label. */
    plain = lo >= -3.0 && hi <= 4.0;
    /* Multiples of `every` decades, so 1e0 is labelled whenever it is in range. */
    for (double d = ceil(lo / every) * every; d <= hi + 0.5 && a->nt < PLOT_MAX_TICKS; d += every) {
        a->t[a->nt] = d;
        if (plain) {
            snprintf(a->lab[a->nt], sizeof a->lab[a->nt], "%g", pow(10.0, d));
        } else {
            snprintf(a->lab[a->nt], sizeof a->lab[a->nt], "1e%d", (int)d);
        }
        a->nt++;
    }
    if (hi - lo <= 8.0) {
        for (double d = lo; d < hi - 0.5; d += 1.0) {
            for (int j = 2; j <= 9 && a->nm < PLOT_MAX_MINOR; j++) {
                a->minor[a->nm++] = d + log10((double)j);
            }
        }
    }
}
