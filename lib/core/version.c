#include "version.h"

/* Both come from the Makefile (-D on this file only); these defaults serve
 * builds that do not go through it. */
#ifndef FS_VERSION
#define FS_VERSION "unknown"
#endif
#ifndef FS_REVISION
#define FS_REVISION ""
#endif

const char *fs_version(void)
{
    return FS_VERSION;
}

const char *fs_revision(void)
{
    return FS_REVISION;
}

const char *fs_version_string(void)
{
    return FS_REVISION[0] != '\0' ? FS_VERSION " (" FS_REVISION ")" : FS_VERSION;
}
