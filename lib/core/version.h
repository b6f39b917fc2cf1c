/* The version every binary reports (--version, /healthz, the HTTP client's
 * User-Agent): the release from the repository's VERSION file and, when it
 * was built from a git checkout, which commit (git describe). The Makefile
 * passes both to version.c alone, so a new version recompiles one file. */
#ifndef FS_CORE_VERSION_H
#define FS_CORE_VERSION_H

/** The release, "0.9.0". */
const char *fs_version(void);

/**
 * The checkout the binaries were built from, as git describe names it with a
 * "g" before a bare commit ("g1a2b3c4", "v0.9.0-3-g1a2b3c4", "-dirty" at the
 * end when tracked files had changes), or "" (built outside git, or from
 * exactly the release's tag).
 */
const char *fs_revision(void);

/** "0.9.0 (g1a2b3c4)", or "0.9.0" when there is no revision: what --version prints. */
const char *fs_version_string(void);

#endif
