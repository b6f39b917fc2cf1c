/* The orientation and the heaviest features of LSA components, shared by
 * fedsvd lsa on loopback (cmd_lsa.c) and the sites' steps (cmd_lsa_sites.c). */
#include <math.h>
#include <stdlib.h>

#include "cmd_lsa.h"

double lsa_orient(const fs_mat *v, size_t j)
{
    double best = 0.0;

    for (size_t i = 0; i < v->rows; i++) {
        if (fabs(FS_MAT_AT(v, i, j)) > fabs(best)) {
            best = FS_MAT_AT(v, i, j);
        }
    }
    return best < 0 ? -1.0 : 1.0;
}

struct weight {
    double w;
    size_t f;
};

/* Heaviest first; equal weights by row (the same order everywhere). */
static int cmp_weight(const void *a, const void *b)
{
    const struct weight *x = a, *y = b;

    if (x->w != y->w) {
        return x->w > y->w ? -1 : 1;
    }
    return x->f < y->f ? -1 : x->f > y->f;
}

size_t lsa_top_rows(const fs_mat *v, size_t j, const unsigned char *keep, size_t top, size_t *out)
{
    struct weight *w = malloc((v->rows > 0 ? v->rows : 1) * sizeof *w);
    double sg = lsa_orient(v, j);
    size_t n = 0;

    if (w == NULL) {
        return 0;
    }
    for (size_t r = 0; r < v->rows; r++) {
        double x = sg * FS_MAT_AT(v, r, j);
        if (x > 0 && (keep == NULL || keep[r])) {
            w[n].w = x;
            w[n].f = r;
            n++;
        }
    }
    qsort(w, n, sizeof *w, cmp_weight);
    n = n < top ? n : top;
    for (size_t q = 0; q < n; q++) {
        out[q] = w[q].f;
    }
    free(w);
    return n;
}
