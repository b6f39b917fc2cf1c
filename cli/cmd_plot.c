/* fedsvd plot scatter|scree|line: small SVG figures of results, written as
 * plain SVG 1.1 text so a person can look at a run in any browser without a
 * plotting stack. Everything is drawn here (axes, ticks, legend); the data
 * come from any matrix file fs_io_load_dense reads.
 *
 * Layout: one plot area with axes on the left and bottom, the title above it
 * and the legend OUTSIDE the area on the right, so a legend never hides data.
 * Text widths are estimated (0.6 em per character), which is what decides
 * the margins; browsers and librsvg render DejaVu/Liberation close to it. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "core/version.h"
#include "io/matio.h"
#include "la/mat.h"
#include "plot_axes.h"

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

#define PLOT_MAX_CLASSES 20      /* distinct labels in a scatter (two palettes of 10) */
#define PLOT_MAX_SERIES  20      /* columns in a line plot */
#define PLOT_MAX_BARS    1000    /* --max of a scree plot */
#define PLOT_LEG_CHARS   28      /* legend entries are cut to at most this many characters */
#define PLOT_MAX_DRAWN   1000000 /* --max-points: 1e6 circles is ~50 MB of SVG */

/* matplotlib's tab10, then tab20's light companions for classes 11..20. */
static const char *const palette[PLOT_MAX_CLASSES] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
    "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"};

/* ---- the figure ---- */

struct plot {
    FILE *f;
    double w, h;
    double x0, x1, y0, y1; /* plot area in px: left, right, top, bottom */
    struct cli_plot_axis ax, ay;
};

static double px_x(const struct plot *p, double v)
{
    return p->x0 + (v - p->ax.lo) / (p->ax.hi - p->ax.lo) * (p->x1 - p->x0);
}

static double px_y(const struct plot *p, double v)
{
    return p->y1 - (v - p->ay.lo) / (p->ay.hi - p->ay.lo) * (p->y1 - p->y0);
}

/* Margins from the title, the widest y tick label and the legend width. */
static void layout(struct plot *p, const char *title, double legend_w)
{
    double ylab = 0.0;

    for (size_t i = 0; i < p->ay.nt; i++) {
        ylab = fmax(ylab, cli_svg_text_px(p->ay.lab[i], 12.0));
    }
    p->x0 = 44.0 + ylab;
    p->x1 = p->w - 24.0 - legend_w;
    p->y0 = title != NULL && title[0] != '\0' ? 48.0 : 20.0;
    p->y1 = p->h - 58.0;
}

static const char style_common[] =
    "text { font-family: 'DejaVu Sans', 'Liberation Sans', Arial, Helvetica, sans-serif;"
    " fill: #222; }\n"
    ".tick { font-size: 12px; fill: #444; }\n"
    ".lab { font-size: 14px; }\n"
    ".title { font-size: 17px; font-weight: bold; }\n"
    ".leg { font-size: 13px; }\n"
    ".grid { stroke: #e3e3e3; stroke-width: 1; }\n"
    ".minor { stroke: #f1f1f1; stroke-width: 1; }\n"
    ".tk { stroke: #555; stroke-width: 1; }\n"
    ".frame { fill: none; stroke: #888; stroke-width: 1; }\n"
    ".legbox { fill: #fff; stroke: #ccc; stroke-width: 1; }\n";

/* The XML prologue, <svg>, <title>, styles, background and clip path. */
static void svg_head(struct plot *p, const char *title, const char *desc)
{
    FILE *f = p->f;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%g\" "
            "height=\"%g\" viewBox=\"0 0 %g %g\">\n",
            p->w, p->h, p->w, p->h);
    fprintf(f, "<title>");
    cli_svg_put_esc(f, title != NULL && title[0] != '\0' ? title : desc);
    fprintf(f, "</title>\n<desc>");
    cli_svg_put_esc(f, desc);
    fprintf(f, " (fedsvd plot %s)</desc>\n", fs_version());
    fprintf(f, "<defs>\n<style type=\"text/css\"><![CDATA[\n%s", style_common);
    for (size_t i = 0; i < PLOT_MAX_CLASSES; i++) {
        fprintf(f, ".c%zu { fill: %s; }\n", i, palette[i]);
    }
    fprintf(f, "]]></style>\n");
    fprintf(f,
            "<clipPath id=\"area\"><rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\"/>"
            "</clipPath>\n</defs>\n",
            p->x0, p->y0, p->x1 - p->x0, p->y1 - p->y0);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"#ffffff\"/>\n", p->w, p->h);
}

static void draw_grid(const struct plot *p)
{
    FILE *f = p->f;

    fprintf(f, "<g class=\"minor\">\n");
    for (size_t i = 0; i < p->ay.nm; i++) {
        double y = px_y(p, p->ay.minor[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", p->x0, y, p->x1, y);
    }
    fprintf(f, "</g>\n<g class=\"grid\">\n");
    for (size_t i = 0; i < p->ax.nt; i++) {
        double x = px_x(p, p->ax.t[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, p->y0, x, p->y1);
    }
    for (size_t i = 0; i < p->ay.nt; i++) {
        double y = px_y(p, p->ay.t[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", p->x0, y, p->x1, y);
    }
    fprintf(f, "</g>\n");
}

/* Centred over the plot area, or over the whole figure (and smaller, down to
 * 10 px) when it is too long for that. */
static void draw_title(const struct plot *p, const char *title)
{
    double tw = cli_svg_text_px(title, 17.0);
    double x = 0.5 * (p->x0 + p->x1);
    double size = 17.0;

    if (tw > p->x1 - p->x0) {
        x = 0.5 * p->w;
        if (tw > p->w - 20.0) {
            size = fmax(10.0, 17.0 * (p->w - 20.0) / tw);
        }
    }
    fprintf(p->f, "<text class=\"title\" x=\"%.1f\" y=\"30\" text-anchor=\"middle\"", x);
    if (size < 17.0) {
        fprintf(p->f, " style=\"font-size: %.1fpx\"", size);
    }
    fprintf(p->f, ">");
    cli_svg_put_esc(p->f, title);
    fprintf(p->f, "</text>\n");
}

/* Frame, ticks, tick labels, axis labels and title; drawn after the data so
 * the frame is never covered by a point. */
static void draw_axes(const struct plot *p, const char *title, const char *xlabel,
                      const char *ylabel)
{
    FILE *f = p->f;
    double ylab = 0.0;

    fprintf(f, "<rect class=\"frame\" x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\"/>\n", p->x0,
            p->y0, p->x1 - p->x0, p->y1 - p->y0);
    fprintf(f, "<g class=\"tk\">\n");
    for (size_t i = 0; i < p->ax.nt; i++) {
        double x = px_x(p, p->ax.t[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\"/>\n", x, p->y1, x,
                p->y1 + 5.0);
    }
    for (size_t i = 0; i < p->ay.nt; i++) {
        double y = px_y(p, p->ay.t[i]);
        fprintf(f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\"/>\n", p->x0 - 5.0, y, p->x0,
                y);
    }
    fprintf(f, "</g>\n<g class=\"tick\">\n");
    for (size_t i = 0; i < p->ax.nt; i++) {
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                px_x(p, p->ax.t[i]), p->y1 + 20.0, p->ax.lab[i]);
    }
    for (size_t i = 0; i < p->ay.nt; i++) {
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", p->x0 - 8.0,
                px_y(p, p->ay.t[i]) + 4.0, p->ay.lab[i]);
        ylab = fmax(ylab, cli_svg_text_px(p->ay.lab[i], 12.0));
    }
    fprintf(f, "</g>\n");
    fprintf(f, "<text class=\"lab\" x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">",
            0.5 * (p->x0 + p->x1), p->y1 + 44.0);
    cli_svg_put_esc(f, xlabel);
    fprintf(f, "</text>\n");
    fprintf(f,
            "<text class=\"lab\" transform=\"translate(%.1f,%.1f) rotate(-90)\" "
            "text-anchor=\"middle\">",
            p->x0 - 20.0 - ylab, 0.5 * (p->y0 + p->y1));
    cli_svg_put_esc(f, ylabel);
    fprintf(f, "</text>\n");
    if (title != NULL && title[0] != '\0') {
        draw_title(p, title);
    }
}

/* ---- legend ---- */

enum leg_kind { LEG_BOX = 0, LEG_LINE = 1 };

struct leg_entry {
    const char *text;
    char num[32]; /* text when no name is given */
    const char *color;
    enum leg_kind kind;
};

#define LEG_ROW 20.0
#define LEG_PAD 10.0

/* Characters a legend entry may have: PLOT_LEG_CHARS, fewer in a narrow
 * figure so that the legend takes at most about a third of the width. */
static size_t legend_chars(const struct plot *p)
{
    double fit = floor((0.35 * p->w - 62.0) / cli_svg_text_px("M", 13.0));

    return fit < 8.0 ? 8 : fit > PLOT_LEG_CHARS ? PLOT_LEG_CHARS : (size_t)fit;
}

/* Width the legend needs, including the gap to the plot area; 0 without entries. */
static double legend_width(const struct plot *p, const char *heading, const struct leg_entry *e,
                           size_t n)
{
    double w = heading != NULL ? cli_svg_text_px(heading, 13.0) : 0.0;
    double cap = cli_svg_text_px("M", 13.0) * (double)legend_chars(p);

    if (n == 0) {
        return 0.0;
    }
    for (size_t i = 0; i < n; i++) {
        w = fmax(w, 26.0 + fmin(cli_svg_text_px(e[i].text, 13.0), cap));
    }
    return 16.0 + 2.0 * LEG_PAD + w;
}

static void draw_legend(const struct plot *p, const char *heading, const struct leg_entry *e,
                        size_t n, double width)
{
    FILE *f = p->f;
    double x = p->x1 + 16.0;
    double y = p->y0;
    double h = (double)n * LEG_ROW + 2.0 * LEG_PAD - 4.0 + (heading != NULL ? LEG_ROW : 0.0);

    if (n == 0) {
        return;
    }
    fprintf(f, "<g class=\"leg\">\n");
    fprintf(f, "<rect class=\"legbox\" x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" rx=\"3\"/>\n",
            x, y, width - 16.0, h);
    x += LEG_PAD;
    y += LEG_PAD;
    if (heading != NULL) {
        fprintf(f, "<text x=\"%g\" y=\"%g\" font-weight=\"bold\">", x, y + 12.0);
        cli_svg_put_esc(f, heading);
        fprintf(f, "</text>\n");
        y += LEG_ROW;
    }
    for (size_t i = 0; i < n; i++, y += LEG_ROW) {
        if (e[i].kind == LEG_BOX) {
            fprintf(f,
                    "<rect x=\"%g\" y=\"%g\" width=\"14\" height=\"14\" rx=\"2\" fill=\"%s\"/>\n",
                    x, y + 1.0, e[i].color);
        } else {
            fprintf(f,
                    "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                    "stroke-width=\"2.5\"/>\n",
                    x - 2.0, y + 8.0, x + 16.0, y + 8.0, e[i].color);
        }
        fprintf(f, "<text x=\"%g\" y=\"%g\">", x + 24.0, y + 12.5);
        cli_svg_put_esc_max(f, e[i].text, legend_chars(p));
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</g>\n");
}

/* ---- output file ---- */

/* Open "<path>.tmp.<pid>" for writing; the figure replaces path only when complete. */
static int svg_open(const char *cmd, const char *path, char *tmp, size_t cap, FILE **out)
{
    *out = NULL;
    if ((size_t)snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid()) >= cap) {
        return cli_runtime_error(cmd, "%s: path too long", path);
    }
    *out = fopen(tmp, "w");
    if (*out == NULL) {
        return cli_runtime_error(cmd, "%s: cannot open for writing: %s", tmp, strerror(errno));
    }
    return CLI_OK;
}

/* Close, check, rename into place; on failure remove the temporary file. *bytes: the size. */
static int svg_close(const char *cmd, FILE *f, const char *tmp, const char *path, long *bytes)
{
    int rc = CLI_OK;

    fprintf(f, "</svg>\n");
    *bytes = ftell(f);
    if (ferror(f) != 0) {
        rc = cli_runtime_error(cmd, "%s: write failed", tmp);
    }
    if (fclose(f) != 0 && rc == CLI_OK) {
        rc = cli_runtime_error(cmd, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (rc == CLI_OK && rename(tmp, path) != 0) {
        rc = cli_runtime_error(cmd, "%s: cannot rename into place: %s", path, strerror(errno));
    }
    if (rc != CLI_OK) {
        unlink(tmp);
    }
    return rc;
}

/* ---- options shared by the subcommands ---- */

struct common {
    const char *in, *in_fmt, *out, *title, *xlabel, *ylabel, *width, *height, *format;
    enum fs_io_format fmt;
    double w, h;
    int json;
};

/* The option-table entries every subcommand has, first in each table. */
/* clang-format off */
#define COMMON_OPTS(c)                                   \
    {"input", CLI_OPT_VALUE, &(c).in, NULL},             \
    {"input-format", CLI_OPT_VALUE, &(c).in_fmt, NULL},  \
    {"out", CLI_OPT_VALUE, &(c).out, NULL},              \
    {"title", CLI_OPT_VALUE, &(c).title, NULL},          \
    {"xlabel", CLI_OPT_VALUE, &(c).xlabel, NULL},        \
    {"ylabel", CLI_OPT_VALUE, &(c).ylabel, NULL},        \
    {"width", CLI_OPT_VALUE, &(c).width, NULL},          \
    {"height", CLI_OPT_VALUE, &(c).height, NULL},        \
    {"format", CLI_OPT_VALUE, &(c).format, NULL}
/* clang-format on */

static void common_help(void)
{
    printf("  --input-format F     format of --input: auto (default), npy, csv, mtx or idx\n"
           "  --out FILE           the SVG file (written atomically)\n"
           "  --title T            title above the plot (default: none)\n"
           "  --xlabel T, --ylabel T  axis labels\n"
           "  --width W, --height H   size in px (default 900 x 600; 300..4000)\n"
           "  --format F           text (default) or json: one line describing the figure\n"
           "  -h, --help           show this text\n");
}

/* Optional numeric options: CLI_OK and *out untouched when s is NULL. */
static int opt_size(const char *cmd, const char *flag, const char *s, size_t min, size_t max,
                    size_t *out)
{
    return s == NULL ? CLI_OK : cli_parse_size(cmd, flag, s, min, max, out);
}

static int opt_double(const char *cmd, const char *flag, const char *s, double lo, double hi,
                      double *out)
{
    return s == NULL ? CLI_OK : cli_parse_double(cmd, flag, s, lo, CLI_CLOSED, hi, CLI_CLOSED, out);
}

static int common_check(const char *cmd, struct common *c)
{
    struct fs_err err;
    int rc;

    if (c->in == NULL || c->out == NULL) {
        return cli_usage_error(cmd, "--input and --out are required");
    }
    c->fmt = FS_FMT_AUTO;
    if (c->in_fmt != NULL && fs_io_format_parse(c->in_fmt, &c->fmt, &err) != 0) {
        return cli_usage_error(cmd, "--input-format: expected auto, npy, csv, mtx or idx, got '%s'",
                               c->in_fmt);
    }
    c->w = 900.0;
    c->h = 600.0;
    rc = opt_double(cmd, "--width", c->width, 300.0, 4000.0, &c->w);
    if (rc != CLI_OK) {
        return rc;
    }
    rc = opt_double(cmd, "--height", c->height, 300.0, 4000.0, &c->h);
    if (rc != CLI_OK) {
        return rc;
    }
    return cli_parse_format(cmd, c->format, &c->json);
}

static int load(const char *cmd, const char *path, enum fs_io_format fmt, fs_mat **out)
{
    struct fs_err err;

    fs_err_clear(&err);
    if (fs_io_load_dense(path, fmt, NULL, out, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    return CLI_OK;
}

/* A matrix that must be a vector (n x 1 or 1 x n): its length and element stride. */
static int as_vector(const char *cmd, const char *path, const fs_mat *m, size_t *n, size_t *stride)
{
    if (m->cols == 1) {
        *n = m->rows;
        *stride = 1;
        return CLI_OK;
    }
    if (m->rows == 1) {
        *n = m->cols;
        *stride = m->ld;
        return CLI_OK;
    }
    return cli_runtime_error(cmd, "%s: expected a vector (n x 1 or 1 x n), found %zu x %zu", path,
                             m->rows, m->cols);
}

/* Copy rows of m (a vector read with stride when vectors is set) into all at row `at`. */
static void copy_rows(fs_mat *all, size_t at, const fs_mat *m, int vectors, size_t n, size_t stride)
{
    for (size_t j = 0; j < all->cols; j++) {
        for (size_t i = 0; i < n; i++) {
            FS_MAT_AT(all, at + i, j) = vectors ? m->data[i * stride] : FS_MAT_AT(m, i, j);
        }
    }
}

/**
 * Load a comma-separated list of files stacked by rows, in order (the parties'
 * rows of a federated run). With vectors set each file must be a vector and
 * the result is one column. A single file is loaded as it is.
 * @param out new matrix, free with fs_mat_free.
 */
static int load_rows(const char *cmd, const char *flag, const char *list, enum fs_io_format fmt,
                     int vectors, fs_mat **out)
{
    struct cli_plot_names files;
    fs_mat **parts = NULL;
    size_t rows = 0, cols = 0, at = 0;
    int rc;

    *out = NULL;
    if (strchr(list, ',') == NULL) {
        return load(cmd, list, fmt, out);
    }
    rc = cli_plot_names_parse(cmd, flag, list, &files);
    if (rc != CLI_OK) {
        return rc;
    }
    parts = calloc(files.n, sizeof *parts);
    if (parts == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    for (size_t f = 0; f < files.n; f++) {
        size_t n = 0, stride = 1;
        rc = load(cmd, files.item[f], fmt, &parts[f]);
        if (rc == CLI_OK && vectors) {
            rc = as_vector(cmd, files.item[f], parts[f], &n, &stride);
        }
        if (rc != CLI_OK) {
            goto out;
        }
        if (!vectors && f > 0 && parts[f]->cols != cols) {
            rc = cli_runtime_error(cmd, "%s: %zu columns, %s has %zu", files.item[f],
                                   parts[f]->cols, files.item[0], cols);
            goto out;
        }
        cols = vectors ? 1 : parts[f]->cols;
        rows += vectors ? n : parts[f]->rows;
    }
    *out = fs_mat_new_uninit(rows, cols);
    if (*out == NULL) {
        rc = cli_runtime_error(cmd, "out of memory for %zu x %zu", rows, cols);
        goto out;
    }
    for (size_t f = 0; f < files.n; f++) {
        size_t n = parts[f]->rows, stride = 1;
        if (vectors) {
            n = parts[f]->cols == 1 ? parts[f]->rows : parts[f]->cols;
            stride = parts[f]->cols == 1 ? 1 : parts[f]->ld;
        }
        copy_rows(*out, at, parts[f], vectors, n, stride);
        at += n;
    }
out:
    for (size_t f = 0; parts != NULL && f < files.n; f++) {
        fs_mat_free(parts[f]);
    }
    free(parts);
    cli_plot_names_free(&files);
    return rc;
}

static int report(const char *cmd, const struct common *c, json_t *obj, const char *text)
{
    if (c->json) {
        return cli_print_json(cmd, obj);
    }
    json_decref(obj);
    printf("%s\n", text);
    return CLI_OK;
}

/* ---- scatter ---- */

static void scatter_help(void)
{
    printf("Usage: fedsvd plot scatter --input SCORES --out FILE.svg [--scale S] [--labels L]\n"
           "                           [--class-names A,B,...] [--x I] [--y J] [--max-points N]\n"
           "                           [--seed N] [--radius R] [--title T] [--xlabel T]\n"
           "                           [--ylabel T] [--width W] [--height H] [--input-format F]\n"
           "                           [--format text|json]\n"
           "\n"
           "Scatter plot of two columns of a score matrix (n x k, one row per sample), e.g.\n"
           "the data projected on the first two principal components, coloured by an integer\n"
           "class label per row, with a legend to the right of the plot.\n"
           "\n"
           "Options:\n"
           "  --input SCORES       n x k matrix (.npy, CSV, MatrixMarket, IDX), or a\n"
           "                       comma-separated list of files stacked by rows in order\n"
           "                       (e.g. one per party)\n"
           "  --scale S            vector: plot column j times S[j], so that '--input U.npy\n"
           "                       --scale S.npy' (from 'fedsvd svd --out') plots U diag(S)\n"
           "  --labels L           n integer labels (vector; .npy, CSV, IDX such as\n"
           "                       t10k-labels-idx1-ubyte.gz), or a comma-separated list of\n"
           "                       vectors concatenated in order; at most 20 distinct values\n"
           "  --class-names LIST   comma-separated; the i-th name is label value i (labels\n"
           "                       without a name are shown as their number)\n"
           "  --x I, --y J         0-based columns for the axes (default 0 and 1); the axes\n"
           "                       are labelled PC<I+1> and PC<J+1> unless --xlabel/--ylabel\n"
           "  --max-points N       draw at most N points (default 20000): a seeded random\n"
           "                       subset, the same for the same --seed (default 1). Points\n"
           "                       are drawn in a shuffled order so no class hides the others\n"
           "  --radius R           circle radius in px (default 1.8 to 3.5 by point count)\n");
    common_help();
    printf("\n"
           "Example:\n"
           "  fedsvd svd --input t10k-images-idx3-ubyte.gz --k 10 --out svd\n"
           "  fedsvd plot scatter --input svd/U.npy --scale svd/S.npy \\\n"
           "      --labels t10k-labels-idx1-ubyte.gz --title 'Fashion-MNIST' --out pca.svg\n");
}

struct scatter_args {
    struct common c;
    const char *scale, *labels, *class_names, *sx, *sy, *smax, *sseed, *sradius;
    size_t xi, yi, max_points;
    uint64_t seed;
    double radius; /* 0: automatic */
};

static int scatter_parse(const char *cmd, int argc, char **argv, struct scatter_args *a, int *help)
{
    struct cli_opt opts[] = {
        COMMON_OPTS(a->c),
        {"scale", CLI_OPT_VALUE, &a->scale, NULL},
        {"labels", CLI_OPT_VALUE, &a->labels, NULL},
        {"class-names", CLI_OPT_VALUE, &a->class_names, NULL},
        {"x", CLI_OPT_VALUE, &a->sx, NULL},
        {"y", CLI_OPT_VALUE, &a->sy, NULL},
        {"max-points", CLI_OPT_VALUE, &a->smax, NULL},
        {"seed", CLI_OPT_VALUE, &a->sseed, NULL},
        {"radius", CLI_OPT_VALUE, &a->sradius, NULL},
    };
    const char *pos[1];
    size_t npos = 0, seed = 1;
    int rc;

    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, help);
    if (rc != CLI_OK || *help) {
        return rc;
    }
    rc = common_check(cmd, &a->c);
    if (rc != CLI_OK) {
        return rc;
    }
    a->xi = 0;
    a->yi = 1;
    a->max_points = 20000;
    rc = opt_size(cmd, "--x", a->sx, 0, 1u << 20, &a->xi);
    if (rc == CLI_OK) {
        rc = opt_size(cmd, "--y", a->sy, 0, 1u << 20, &a->yi);
    }
    if (rc == CLI_OK) {
        rc = opt_size(cmd, "--max-points", a->smax, 1, PLOT_MAX_DRAWN, &a->max_points);
    }
    if (rc == CLI_OK) {
        rc = opt_size(cmd, "--seed", a->sseed, 0, SIZE_MAX, &seed);
    }
    a->seed = (uint64_t)seed;
    a->radius = 0.0;
    if (rc == CLI_OK && a->sradius != NULL) {
        rc = cli_parse_double(cmd, "--radius", a->sradius, 0.0, CLI_OPEN, 50.0, CLI_CLOSED,
                              &a->radius);
    }
    return rc;
}

/* splitmix64: a fixed, documented stream so a --seed gives the same subset on
 * every platform (the C library generator would not, and nothing here is secret). */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The first m entries of a seeded permutation of 0..n-1 (partial Fisher-Yates).
 * Returns a new array of n indices (free()), NULL on OOM. The modulo bias is
 * below 2^-40 for any n under the caps, irrelevant for picking points to draw. */
static size_t *draw_order(size_t n, size_t m, uint64_t seed)
{
    size_t *idx = malloc((n > 0 ? n : 1) * sizeof *idx);
    uint64_t s = seed;

    if (idx == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
    }
    for (size_t i = 0; i < m && i + 1 < n; i++) {
        size_t j = i + (size_t)(splitmix64(&s) % (uint64_t)(n - i));
        size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    return idx;
}

/* Labels as class numbers 0..C-1 (by sorted distinct value); values[c] is the label value. */
struct classes {
    size_t *of; /* per row */
    long values[PLOT_MAX_CLASSES];
    size_t n;
};

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a;
    long y = *(const long *)b;

    return (x > y) - (x < y);
}

static int classes_from(const char *cmd, const char *path, const fs_mat *lab, size_t rows,
                        struct classes *cl)
{
    size_t n = 0, stride = 1;
    long *sorted = NULL;
    int rc;

    rc = as_vector(cmd, path, lab, &n, &stride);
    if (rc != CLI_OK) {
        return rc;
    }
    if (n != rows) {
        return cli_runtime_error(cmd, "%s: %zu labels for %zu rows of scores", path, n, rows);
    }
    cl->of = malloc((n > 0 ? n : 1) * sizeof *cl->of);
    sorted = malloc((n > 0 ? n : 1) * sizeof *sorted);
    if (cl->of == NULL || sorted == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        double v = lab->data[i * stride];
        if (v != floor(v) || fabs(v) > 2147483647.0) {
            rc = cli_runtime_error(cmd, "%s: label %zu is %g, expected an integer", path, i + 1, v);
            goto out;
        }
        sorted[i] = (long)v;
    }
    qsort(sorted, n, sizeof *sorted, cmp_long);
    cl->n = 0;
    for (size_t i = 0; i < n; i++) {
        if (cl->n > 0 && cl->values[cl->n - 1] == sorted[i]) {
            continue;
        }
        if (cl->n == PLOT_MAX_CLASSES) {
            rc = cli_runtime_error(cmd, "%s: more than %d distinct labels", path, PLOT_MAX_CLASSES);
            goto out;
        }
        cl->values[cl->n++] = sorted[i];
    }
    for (size_t i = 0; i < n; i++) {
        long v = (long)lab->data[i * stride];
        const long *hit = bsearch(&v, cl->values, cl->n, sizeof v, cmp_long);
        cl->of[i] = (size_t)(hit - cl->values);
    }
out:
    free(sorted);
    return rc;
}

/* Range of the drawn points with 4% padding on each side; -1 if it overflows a double. */
static int padded_range(const double *v, size_t m, double *lo, double *hi)
{
    double a = v[0], b = v[0];

    for (size_t i = 1; i < m; i++) {
        a = fmin(a, v[i]);
        b = fmax(b, v[i]);
    }
    *lo = a - 0.04 * (b - a);
    *hi = b + 0.04 * (b - a);
    return isfinite(*lo) && isfinite(*hi) && isfinite(*hi - *lo) ? 0 : -1;
}

struct scatter_data {
    fs_mat *scores, *scale, *labels;
    struct classes cl;
    struct cli_plot_names names;
    size_t *order;
    double *xs, *ys;
    double xl, xh, yl, yh; /* padded ranges */
    size_t m;
    struct leg_entry leg[PLOT_MAX_CLASSES];
    char xlab[32], ylab[32];
};

static void scatter_data_free(struct scatter_data *d)
{
    free(d->ys);
    free(d->xs);
    free(d->order);
    cli_plot_names_free(&d->names);
    free(d->cl.of);
    fs_mat_free(d->labels);
    fs_mat_free(d->scale);
    fs_mat_free(d->scores);
}

/* Load the files, check shapes, pick and scale the points to draw. */
static int scatter_prepare(const char *cmd, const struct scatter_args *a, struct scatter_data *d)
{
    double sx = 1.0, sy = 1.0;
    int rc;

    rc = load_rows(cmd, "--input", a->c.in, a->c.fmt, 0, &d->scores);
    if (rc != CLI_OK) {
        return rc;
    }
    if (a->xi >= d->scores->cols || a->yi >= d->scores->cols) {
        return cli_runtime_error(cmd, "%s: column %zu out of range (the matrix has %zu columns)",
                                 a->c.in, a->xi >= d->scores->cols ? a->xi : a->yi,
                                 d->scores->cols);
    }
    if (a->scale != NULL) {
        size_t n = 0, stride = 1;
        rc = load(cmd, a->scale, FS_FMT_AUTO, &d->scale);
        if (rc == CLI_OK) {
            rc = as_vector(cmd, a->scale, d->scale, &n, &stride);
        }
        if (rc != CLI_OK) {
            return rc;
        }
        if (a->xi >= n || a->yi >= n) {
            return cli_runtime_error(cmd, "%s: %zu values, column %zu needs a scale", a->scale, n,
                                     a->xi >= n ? a->xi : a->yi);
        }
        sx = d->scale->data[a->xi * stride];
        sy = d->scale->data[a->yi * stride];
    }
    if (a->labels != NULL) {
        rc = load_rows(cmd, "--labels", a->labels, FS_FMT_AUTO, 1, &d->labels);
        if (rc == CLI_OK) {
            rc = classes_from(cmd, a->labels, d->labels, d->scores->rows, &d->cl);
        }
        if (rc != CLI_OK) {
            return rc;
        }
    }
    rc = cli_plot_names_parse(cmd, "--class-names", a->class_names, &d->names);
    if (rc != CLI_OK) {
        return rc;
    }
    if (d->scores->rows == 0) {
        return cli_runtime_error(cmd, "%s: no rows to plot", a->c.in);
    }
    d->m = d->scores->rows < a->max_points ? d->scores->rows : a->max_points;
    d->order = draw_order(d->scores->rows, d->m, a->seed);
    d->xs = malloc(d->m * sizeof *d->xs);
    d->ys = malloc(d->m * sizeof *d->ys);
    if (d->order == NULL || d->xs == NULL || d->ys == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    for (size_t i = 0; i < d->m; i++) {
        d->xs[i] = sx * FS_MAT_AT(d->scores, d->order[i], a->xi);
        d->ys[i] = sy * FS_MAT_AT(d->scores, d->order[i], a->yi);
        if (!isfinite(d->xs[i]) || !isfinite(d->ys[i])) {
            return cli_runtime_error(cmd, "%s: row %zu times the scale is not finite", a->c.in,
                                     d->order[i] + 1);
        }
    }
    if (padded_range(d->xs, d->m, &d->xl, &d->xh) != 0 ||
        padded_range(d->ys, d->m, &d->yl, &d->yh) != 0) {
        return cli_runtime_error(cmd, "%s: the range of the values overflows a double", a->c.in);
    }
    return CLI_OK;
}

static void scatter_legend(struct scatter_data *d)
{
    for (size_t c = 0; c < d->cl.n; c++) {
        long v = d->cl.values[c];
        struct leg_entry *e = &d->leg[c];

        snprintf(e->num, sizeof e->num, "%ld", v);
        e->text = e->num;
        if (v >= 0 && (size_t)v < d->names.n && d->names.item[v][0] != '\0') {
            e->text = d->names.item[v];
        }
        e->color = palette[c];
        e->kind = LEG_BOX;
    }
}

static void scatter_draw(struct plot *p, const struct scatter_args *a, struct scatter_data *d)
{
    double r = a->radius > 0.0 ? a->radius : d->m <= 1000 ? 3.5 : d->m <= 5000 ? 2.5 : 1.8;
    double lw;
    const char *xlabel = a->c.xlabel, *ylabel = a->c.ylabel;

    snprintf(d->xlab, sizeof d->xlab, "PC%zu", a->xi + 1);
    snprintf(d->ylab, sizeof d->ylab, "PC%zu", a->yi + 1);
    xlabel = xlabel != NULL ? xlabel : d->xlab;
    ylabel = ylabel != NULL ? ylabel : d->ylab;
    cli_plot_axis_linear(&p->ax, d->xl, d->xh, 8.0, 0.0);
    cli_plot_axis_linear(&p->ay, d->yl, d->yh, 7.0, 0.0);
    scatter_legend(d);
    lw = legend_width(p, d->cl.n > 0 ? "class" : NULL, d->leg, d->cl.n);
    layout(p, a->c.title, lw);
    svg_head(p, a->c.title, "scatter plot");
    draw_grid(p);
    fprintf(p->f, "<g fill-opacity=\"0.6\">\n");
    for (size_t i = 0; i < d->m; i++) {
        size_t c = d->cl.of != NULL ? d->cl.of[d->order[i]] : 0;
        fprintf(p->f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%g\" class=\"c%zu\"/>\n",
                px_x(p, d->xs[i]), px_y(p, d->ys[i]), r, c);
    }
    fprintf(p->f, "</g>\n");
    draw_axes(p, a->c.title, xlabel, ylabel);
    draw_legend(p, "class", d->leg, d->cl.n, lw);
}

static int plot_scatter(int argc, char **argv)
{
    const char *cmd = "plot scatter";
    struct scatter_args a;
    struct scatter_data d;
    struct plot p;
    char tmp[4096], text[4352];
    long bytes = 0;
    int help = 0, rc;

    memset(&a, 0, sizeof a);
    memset(&d, 0, sizeof d);
    memset(&p, 0, sizeof p);
    rc = scatter_parse(cmd, argc, argv, &a, &help);
    if (rc != CLI_OK || help) {
        if (help) {
            scatter_help();
        }
        return rc;
    }
    rc = scatter_prepare(cmd, &a, &d);
    if (rc == CLI_OK) {
        rc = svg_open(cmd, a.c.out, tmp, sizeof tmp, &p.f);
    }
    if (rc != CLI_OK) {
        goto out;
    }
    p.w = a.c.w;
    p.h = a.c.h;
    scatter_draw(&p, &a, &d);
    rc = svg_close(cmd, p.f, tmp, a.c.out, &bytes);
    if (rc != CLI_OK) {
        goto out;
    }
    snprintf(text, sizeof text, "wrote %s: scatter of %zu of %zu points, %zu classes, %ld bytes",
             a.c.out, d.m, d.scores->rows, d.cl.n, bytes);
    rc = report(cmd, &a.c,
                json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "kind", "scatter", "out", a.c.out,
                          "points", (json_int_t)d.m, "rows", (json_int_t)d.scores->rows, "classes",
                          (json_int_t)d.cl.n, "bytes", (json_int_t)bytes),
                text);
out:
    scatter_data_free(&d);
    return rc;
}

/* ---- scree ---- */

static void scree_help(void)
{
    printf("Usage: fedsvd plot scree --input RATIO --out FILE.svg [--cumulative] [--max M]\n"
           "                         [--singular-values [--total T]] [--title T] [--xlabel T]\n"
           "                         [--ylabel T] [--width W] [--height H] [--input-format F]\n"
           "                         [--format text|json]\n"
           "\n"
           "Bar chart of the explained variance ratio of each component, optionally with the\n"
           "cumulative ratio as a line.\n"
           "\n"
           "Options:\n"
           "  --input RATIO        vector of ratios, one per component, largest first\n"
           "  --cumulative         also draw the cumulative ratio (line, same axis)\n"
           "  --max M              show the first M components (default 50, at most 1000)\n"
           "  --singular-values    the input holds singular values s (e.g. S.npy from 'fedsvd\n"
           "                       svd'): plot s_i^2 / T. Without --total, T is the sum of\n"
           "                       the given s_i^2, i.e. the ratio among these components\n"
           "                       only, not of the whole data's variance\n"
           "  --total T            total variance (e.g. the squared Frobenius norm of the\n"
           "                       centred data), with --singular-values\n");
    common_help();
    printf("\n"
           "Example: fedsvd plot scree --input ratio.npy --cumulative --title 'PCA' --out "
           "scree.svg\n");
}

struct scree_args {
    struct common c;
    const char *smax, *stotal;
    int cumulative, singular;
    size_t max;
    double total; /* 0: sum of the given squares */
};

static int scree_parse(const char *cmd, int argc, char **argv, struct scree_args *a, int *help)
{
    struct cli_opt opts[] = {
        COMMON_OPTS(a->c),
        {"max", CLI_OPT_VALUE, &a->smax, NULL},
        {"total", CLI_OPT_VALUE, &a->stotal, NULL},
        {"cumulative", CLI_OPT_FLAG, NULL, &a->cumulative},
        {"singular-values", CLI_OPT_FLAG, NULL, &a->singular},
    };
    const char *pos[1];
    size_t npos = 0;
    int rc;

    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, help);
    if (rc != CLI_OK || *help) {
        return rc;
    }
    rc = common_check(cmd, &a->c);
    if (rc != CLI_OK) {
        return rc;
    }
    a->max = 50;
    rc = opt_size(cmd, "--max", a->smax, 1, PLOT_MAX_BARS, &a->max);
    if (rc != CLI_OK) {
        return rc;
    }
    if (a->stotal != NULL && !a->singular) {
        return cli_usage_error(cmd, "--total needs --singular-values");
    }
    if (a->stotal != NULL) {
        rc = cli_parse_double(cmd, "--total", a->stotal, 0.0, CLI_OPEN, 0.0, CLI_NONE, &a->total);
    }
    return rc;
}

/* ratio[0..m) from the input vector (all of it enters the --singular-values total). */
static int scree_ratios(const char *cmd, const struct scree_args *a, const fs_mat *v, double *ratio,
                        size_t *m)
{
    size_t n = 0, stride = 1;
    double total = a->total;
    double sum = 0.0;
    int rc;

    rc = as_vector(cmd, a->c.in, v, &n, &stride);
    if (rc != CLI_OK) {
        return rc;
    }
    if (n == 0) {
        return cli_runtime_error(cmd, "%s: no values to plot", a->c.in);
    }
    for (size_t i = 0; i < n; i++) {
        if (v->data[i * stride] < 0.0) {
            return cli_runtime_error(cmd, "%s: value %zu is negative (%g)", a->c.in, i + 1,
                                     v->data[i * stride]);
        }
    }
    if (a->singular && total == 0.0) {
        for (size_t i = 0; i < n; i++) {
            total += v->data[i * stride] * v->data[i * stride];
        }
        if (!(total > 0.0) || !isfinite(total)) {
            return cli_runtime_error(cmd, "%s: the sum of squares is %g", a->c.in, total);
        }
    }
    *m = n < a->max ? n : a->max;
    for (size_t i = 0; i < *m; i++) {
        double s = v->data[i * stride];
        ratio[i] = a->singular ? s * s / total : s;
        sum += ratio[i];
    }
    if (!isfinite(1.1 * sum)) {
        return cli_runtime_error(cmd, "%s: the sum of the values overflows a double", a->c.in);
    }
    return CLI_OK;
}

static void scree_draw(struct plot *p, const struct scree_args *a, const double *ratio, size_t m,
                       double *cum_last)
{
    struct leg_entry leg[2] = {{"per component", "", palette[0], LEG_BOX},
                               {"cumulative", "", palette[1], LEG_LINE}};
    double top = 0.0, cum = 0.0, lw, bw;
    FILE *f;

    for (size_t i = 0; i < m; i++) {
        cum += ratio[i];
        top = fmax(top, a->cumulative ? cum : ratio[i]);
    }
    *cum_last = cum;
    cli_plot_axis_components(&p->ax, m);
    cli_plot_axis_linear(&p->ay, 0.0, top > 0.0 ? top * 1.05 : 1.0, 7.0, 0.0);
    lw = legend_width(p, NULL, leg, a->cumulative ? 2 : 1);
    layout(p, a->c.title, lw);
    svg_head(p, a->c.title, "explained variance ratio");
    draw_grid(p);
    f = p->f;
    bw = 0.8 * (px_x(p, 2.0) - px_x(p, 1.0));
    fprintf(f, "<g fill=\"%s\">\n", palette[0]);
    for (size_t i = 0; i < m; i++) {
        double x = px_x(p, (double)(i + 1));
        double y = px_y(p, ratio[i]);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>\n", x - bw / 2, y,
                bw, p->y1 - y);
    }
    fprintf(f, "</g>\n");
    if (a->cumulative) {
        cum = 0.0;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" points=\"",
                palette[1]);
        for (size_t i = 0; i < m; i++) {
            cum += ratio[i];
            fprintf(f, "%s%.1f,%.1f", i > 0 ? " " : "", px_x(p, (double)(i + 1)), px_y(p, cum));
        }
        fprintf(f, "\"/>\n");
        if (m <= 60) {
            cum = 0.0;
            fprintf(f, "<g fill=\"%s\">\n", palette[1]);
            for (size_t i = 0; i < m; i++) {
                cum += ratio[i];
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>\n", px_x(p, (double)(i + 1)),
                        px_y(p, cum));
            }
            fprintf(f, "</g>\n");
        }
        /* The total, under the end of the line where the bars are lowest. */
        fprintf(
            f,
            "<text class=\"leg\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.1f%% in %zu</text>\n",
            px_x(p, (double)m) - 4.0, px_y(p, cum) + 20.0, 100.0 * cum, m);
    }
    draw_axes(p, a->c.title, a->c.xlabel != NULL ? a->c.xlabel : "component",
              a->c.ylabel != NULL ? a->c.ylabel : "explained variance ratio");
    draw_legend(p, NULL, leg, a->cumulative ? 2 : 1, lw);
}

static int plot_scree(int argc, char **argv)
{
    const char *cmd = "plot scree";
    struct scree_args a;
    struct plot p;
    fs_mat *v = NULL;
    double *ratio = NULL;
    double cum = 0.0;
    size_t m = 0;
    char tmp[4096], text[4352];
    long bytes = 0;
    int help = 0, rc;

    memset(&a, 0, sizeof a);
    memset(&p, 0, sizeof p);
    rc = scree_parse(cmd, argc, argv, &a, &help);
    if (rc != CLI_OK || help) {
        if (help) {
            scree_help();
        }
        return rc;
    }
    ratio = malloc(a.max * sizeof *ratio);
    if (ratio == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    rc = load(cmd, a.c.in, a.c.fmt, &v);
    if (rc == CLI_OK) {
        rc = scree_ratios(cmd, &a, v, ratio, &m);
    }
    if (rc == CLI_OK) {
        rc = svg_open(cmd, a.c.out, tmp, sizeof tmp, &p.f);
    }
    if (rc != CLI_OK) {
        goto out;
    }
    p.w = a.c.w;
    p.h = a.c.h;
    scree_draw(&p, &a, ratio, m, &cum);
    rc = svg_close(cmd, p.f, tmp, a.c.out, &bytes);
    if (rc != CLI_OK) {
        goto out;
    }
    snprintf(text, sizeof text, "wrote %s: scree of %zu components (cumulative %.4g), %ld bytes",
             a.c.out, m, cum, bytes);
    rc = report(cmd, &a.c,
                json_pack("{s:s, s:s, s:I, s:o, s:I}", "kind", "scree", "out", a.c.out,
                          "components", (json_int_t)m, "cumulative", cli_json_num(cum), "bytes",
                          (json_int_t)bytes),
                text);
out:
    free(ratio);
    fs_mat_free(v);
    return rc;
}

/* ---- line ---- */

static void line_help(void)
{
    printf("Usage: fedsvd plot line --input Y --out FILE.svg [--log-y] [--names A,B,...]\n"
           "                        [--max-points N] [--title T] [--xlabel T] [--ylabel T]\n"
           "                        [--width W] [--height H] [--input-format F]\n"
           "                        [--format text|json]\n"
           "\n"
           "Line plot of each column of Y (up to 20) against the row index 0, 1, ..., e.g. a\n"
           "convergence history with one column per run or per error measure.\n"
           "\n"
           "Options:\n"
           "  --input Y            rows x series matrix (.npy, CSV, MatrixMarket, IDX)\n"
           "  --log-y              logarithmic y axis; values <= 0 are left out (the line\n"
           "                       has a gap there)\n"
           "  --names LIST         comma-separated series names, one per column (legend;\n"
           "                       without it a legend is drawn only for several columns)\n"
           "  --max-points N       at most about N points per series (default 5000): every\n"
           "                       k-th row and the last one\n");
    common_help();
    printf(
        "\n"
        "Example: fedsvd plot line --input err.npy --log-y --names power,fedsvd --out conv.svg\n");
}

struct line_args {
    struct common c;
    const char *names, *smax;
    int log_y;
    size_t max_points;
};

static int line_parse(const char *cmd, int argc, char **argv, struct line_args *a, int *help)
{
    struct cli_opt opts[] = {
        COMMON_OPTS(a->c),
        {"names", CLI_OPT_VALUE, &a->names, NULL},
        {"max-points", CLI_OPT_VALUE, &a->smax, NULL},
        {"log-y", CLI_OPT_FLAG, NULL, &a->log_y},
    };
    const char *pos[1];
    size_t npos = 0;
    int rc;

    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, help);
    if (rc != CLI_OK || *help) {
        return rc;
    }
    rc = common_check(cmd, &a->c);
    if (rc != CLI_OK) {
        return rc;
    }
    a->max_points = 5000;
    return opt_size(cmd, "--max-points", a->smax, 2, PLOT_MAX_DRAWN, &a->max_points);
}

static int line_check(const char *cmd, const struct line_args *a, const fs_mat *y,
                      const struct cli_plot_names *nm, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    if (y->rows == 0 || y->cols == 0) {
        return cli_runtime_error(cmd, "%s: no values to plot", a->c.in);
    }
    if (y->cols > PLOT_MAX_SERIES) {
        return cli_runtime_error(cmd, "%s: %zu columns, at most %d series", a->c.in, y->cols,
                                 PLOT_MAX_SERIES);
    }
    if (nm->n > 0 && nm->n != y->cols) {
        return cli_runtime_error(cmd, "--names: %zu names for %zu columns of %s", nm->n, y->cols,
                                 a->c.in);
    }
    for (size_t j = 0; j < y->cols; j++) {
        for (size_t i = 0; i < y->rows; i++) {
            double v = FS_MAT_AT(y, i, j);
            if (!a->log_y || v > 0.0) {
                *lo = fmin(*lo, v);
                *hi = fmax(*hi, v);
            }
        }
    }
    if (*lo > *hi) {
        return cli_runtime_error(cmd, "%s: --log-y needs positive values, found none", a->c.in);
    }
    if (!a->log_y && !isfinite(1.1 * (*hi - *lo))) {
        return cli_runtime_error(cmd, "%s: the range of the values overflows a double", a->c.in);
    }
    return CLI_OK;
}

static void line_series(const struct plot *p, const struct line_args *a, const fs_mat *y, size_t j,
                        size_t stride)
{
    FILE *f = p->f;
    int pen_down = 0;
    size_t drawn = 0;

    fprintf(f,
            "<path fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-linejoin=\"round\" d=\"",
            palette[j]);
    /* Every stride-th row, and always the last one. */
    for (size_t i = 0;; i = i + stride < y->rows - 1 ? i + stride : y->rows - 1) {
        double v = FS_MAT_AT(y, i, j);
        if (a->log_y && !(v > 0.0)) {
            pen_down = 0;
        } else {
            fprintf(f, "%s%.1f,%.1f", pen_down ? " L" : (drawn > 0 ? " M" : "M"),
                    px_x(p, (double)i), px_y(p, a->log_y ? log10(v) : v));
            pen_down = 1;
            drawn++;
        }
        if (i + 1 >= y->rows) {
            break;
        }
    }
    fprintf(f, "\"/>\n");
    if (y->rows > 60 || stride > 1) {
        return;
    }
    fprintf(f, "<g fill=\"%s\">\n", palette[j]);
    for (size_t i = 0; i < y->rows; i++) {
        double v = FS_MAT_AT(y, i, j);
        if (!a->log_y || v > 0.0) {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"/>\n", px_x(p, (double)i),
                    px_y(p, a->log_y ? log10(v) : v));
        }
    }
    fprintf(f, "</g>\n");
}

static void line_draw(struct plot *p, const struct line_args *a, const fs_mat *y,
                      const struct cli_plot_names *nm, double lo, double hi)
{
    struct leg_entry leg[PLOT_MAX_SERIES];
    size_t nleg = nm->n > 0 || y->cols > 1 ? y->cols : 0;
    size_t stride = (y->rows + a->max_points - 1) / a->max_points;
    double lw;

    if (a->log_y) {
        cli_plot_axis_log(&p->ay, lo, hi);
    } else {
        cli_plot_axis_linear(&p->ay, lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo), 7.0, 0.0);
    }
    /* 2% on each side so end markers are not cut in half by the clip path. */
    cli_plot_axis_linear(&p->ax, -0.02 * (double)(y->rows - 1), 1.02 * (double)(y->rows - 1), 8.0,
                         1.0);
    for (size_t j = 0; j < nleg; j++) {
        snprintf(leg[j].num, sizeof leg[j].num, "column %zu", j);
        leg[j].text = nm->n > 0 && nm->item[j][0] != '\0' ? nm->item[j] : leg[j].num;
        leg[j].color = palette[j];
        leg[j].kind = LEG_LINE;
    }
    lw = legend_width(p, NULL, leg, nleg);
    layout(p, a->c.title, lw);
    svg_head(p, a->c.title, "line plot");
    draw_grid(p);
    fprintf(p->f, "<g clip-path=\"url(#area)\">\n");
    for (size_t j = 0; j < y->cols; j++) {
        line_series(p, a, y, j, stride > 0 ? stride : 1);
    }
    fprintf(p->f, "</g>\n");
    draw_axes(p, a->c.title, a->c.xlabel != NULL ? a->c.xlabel : "iteration",
              a->c.ylabel != NULL ? a->c.ylabel : "value");
    draw_legend(p, NULL, leg, nleg, lw);
}

/* Check y against the arguments and write the SVG a->c.out. */
static int line_write(const char *cmd, const struct line_args *a, const fs_mat *y, long *bytes)
{
    struct cli_plot_names nm;
    struct plot p;
    double lo = 0.0, hi = 0.0;
    char tmp[4096];
    int rc;

    memset(&nm, 0, sizeof nm);
    memset(&p, 0, sizeof p);
    rc = cli_plot_names_parse(cmd, "--names", a->names, &nm);
    if (rc == CLI_OK) {
        rc = line_check(cmd, a, y, &nm, &lo, &hi);
    }
    if (rc == CLI_OK) {
        rc = svg_open(cmd, a->c.out, tmp, sizeof tmp, &p.f);
    }
    if (rc == CLI_OK) {
        p.w = a->c.w;
        p.h = a->c.h;
        line_draw(&p, a, y, &nm, lo, hi);
        rc = svg_close(cmd, p.f, tmp, a->c.out, bytes);
    }
    cli_plot_names_free(&nm);
    return rc;
}

int cli_plot_line(const char *cmd, const fs_mat *y, const struct cli_line_plot *opt)
{
    struct line_args a;
    long bytes = 0;

    memset(&a, 0, sizeof a);
    a.c.in = opt->what != NULL ? opt->what : "values";
    a.c.out = opt->out;
    a.c.title = opt->title;
    a.c.xlabel = opt->xlabel;
    a.c.ylabel = opt->ylabel;
    a.c.w = 900.0;
    a.c.h = 600.0;
    a.names = opt->names;
    a.log_y = opt->log_y;
    a.max_points = 5000;
    return line_write(cmd, &a, y, &bytes);
}

static int plot_line(int argc, char **argv)
{
    const char *cmd = "plot line";
    struct line_args a;
    fs_mat *y = NULL;
    char text[4352];
    long bytes = 0;
    int help = 0, rc;

    memset(&a, 0, sizeof a);
    rc = line_parse(cmd, argc, argv, &a, &help);
    if (rc != CLI_OK || help) {
        if (help) {
            line_help();
        }
        return rc;
    }
    rc = load(cmd, a.c.in, a.c.fmt, &y);
    if (rc == CLI_OK) {
        rc = line_write(cmd, &a, y, &bytes);
    }
    if (rc != CLI_OK) {
        goto out;
    }
    snprintf(text, sizeof text, "wrote %s: %zu series of %zu rows, %ld bytes", a.c.out, y->cols,
             y->rows, bytes);
    rc = report(cmd, &a.c,
                json_pack("{s:s, s:s, s:I, s:I, s:I}", "kind", "line", "out", a.c.out, "rows",
                          (json_int_t)y->rows, "series", (json_int_t)y->cols, "bytes",
                          (json_int_t)bytes),
                text);
out:
    fs_mat_free(y);
    return rc;
}

/* ---- dispatch ---- */

static void plot_help(void)
{
    printf("Usage: fedsvd plot SUBCOMMAND [OPTIONS]\n"
           "\n"
           "Write a figure as an SVG file (opens in any web browser).\n"
           "\n"
           "Subcommands:\n"
           "  scatter   two columns of a score matrix, coloured by class label (PCA plots)\n"
           "  scree     explained variance ratio per component, optionally cumulative\n"
           "  line      columns of a matrix against the row index (convergence histories)\n"
           "\n"
           "Run 'fedsvd plot SUBCOMMAND --help' for the options of each.\n");
}

int cmd_plot(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "fedsvd plot: missing SUBCOMMAND, scatter, scree or line (see 'fedsvd "
                        "plot --help')\n");
        return CLI_EUSAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        plot_help();
        return CLI_OK;
    }
    if (strcmp(argv[1], "scatter") == 0) {
        return plot_scatter(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "scree") == 0) {
        return plot_scree(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "line") == 0) {
        return plot_line(argc - 1, argv + 1);
    }
    fprintf(stderr, "fedsvd plot: unknown subcommand '%s' (see 'fedsvd plot --help')\n", argv[1]);
    return CLI_EUSAGE;
}
