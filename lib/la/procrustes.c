#include "procrustes.h"

#include <stddef.h>

#include "la_internal.h"
#include "svd.h"

int fs_procrustes_rotation(const fs_mat *m, fs_mat **d_out, struct fs_err *err)
{
    fs_svd s = {0};
    int rc;

    if (d_out == NULL) {
        return fs_err_set(err, FS_EINVAL, "procrustes: d_out is NULL");
    }
    *d_out = NULL;
    rc = fs_svd_thin(m, &s, err);
    if (rc == 0) {
        rc = fs_mat_mul('N', 'T', s.u, s.v, d_out, err);
    }
    fs_svd_clear(&s);
    return rc;
}

int fs_procrustes_align(const fs_mat *y, const fs_mat *z_ref, fs_mat **y_aligned,
                        fs_mat **d_or_null, struct fs_err *err)
{
    fs_mat *m = NULL;
    fs_mat *d = NULL;
    int rc;

    if (y_aligned == NULL) {
        return fs_err_set(err, FS_EINVAL, "procrustes: y_aligned is NULL");
    }
    *y_aligned = NULL;
    if (d_or_null != NULL) {
        *d_or_null = NULL;
    }
    if (!la_mat_ok(y) || !la_mat_ok(z_ref)) {
        return fs_err_set(err, FS_EINVAL, "procrustes: invalid matrix");
    }
    if (y->rows != z_ref->rows || y->cols != z_ref->cols) {
        return fs_err_set(err, FS_EINVAL, "procrustes: Y is %zux%zu but Z_ref is %zux%zu", y->rows,
                          y->cols, z_ref->rows, z_ref->cols);
    }
    rc = fs_mat_mul('T', 'N', y, z_ref, &m, err);
    if (rc == 0) {
        rc = fs_procrustes_rotation(m, &d, err);
    }
    if (rc == 0) {
        rc = fs_mat_mul('N', 'N', y, d, y_aligned, err);
    }
    if (rc == 0 && d_or_null != NULL) {
        *d_or_null = d;
        d = NULL;
    }
    fs_mat_free(d);
    fs_mat_free(m);
    return rc;
}
