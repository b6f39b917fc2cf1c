/* The text, name-list and axis helpers of `fedsvd plot` (plot_axes.c),
 * used by the figures of cmd_plot.c. */
#ifndef FS_CLI_PLOT_AXES_H
#define FS_CLI_PLOT_AXES_H

#include <stddef.h>
#include <stdio.h>

#define PLOT_MAX_NAMES 256 /* entries in --class-names / --names */
#define PLOT_MAX_TICKS 32  /* major ticks per axis */
#define PLOT_MAX_MINOR 96  /* minor (log) ticks per axis */

/* A comma-separated list of names ("T-shirt,Trouser,..."). */
struct cli_plot_names {
    char *buf;   /* one copy of the argument, commas replaced by NULs */
    char **item; /* borrowed from buf */
    size_t n;
};

/* One axis: its range and ticks. */
struct cli_plot_axis {
    double lo, hi; /* the shown range, in axis units (log10 of the data on a log axis) */
    int log;
    size_t nt;
    double t[PLOT_MAX_TICKS]; /* major ticks, axis units */
    char lab[PLOT_MAX_TICKS][32];
    size_t nm;
    double minor[PLOT_MAX_MINOR]; /* log axes only */
};

/** Write s XML-escaped, at most max_chars characters (UTF-8 aware; "..." when cut). */
void cli_svg_put_esc_max(FILE *f, const char *s, size_t max_chars);

/** Write s XML-escaped. */
void cli_svg_put_esc(FILE *f, const char *s);

/** Estimated width in px of s at font size `size`. */
double cli_svg_text_px(const char *s, double size);

void cli_plot_names_free(struct cli_plot_names *nm);

/** Parse a comma-separated list for option `flag`. CLI_OK or CLI_EUSAGE. */
int cli_plot_names_parse(const char *cmd, const char *flag, const char *s,
                         struct cli_plot_names *nm);

/** A linear axis over lo..hi with about `target` ticks at least min_step apart. */
void cli_plot_axis_linear(struct cli_plot_axis *a, double lo, double hi, double target,
                          double min_step);

/** An axis of components 1..m. */
void cli_plot_axis_components(struct cli_plot_axis *a, size_t m);

/** A log10 axis over minv..maxv (both > 0). */
void cli_plot_axis_log(struct cli_plot_axis *a, double minv, double maxv);

#endif
