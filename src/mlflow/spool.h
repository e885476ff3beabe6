/*
 * spool.h — the spool past the ring (docs/design.md §6, "The spool";
 * docs/rest.md): when delivery fails and the ring nears full, the delivery
 * policy (deliver.c) moves the oldest records into bounded files on disk and
 * replays them, oldest first, before the ring once the store answers;
 * `scopemeter sync` (cli/cmd_sync.c) delivers what a dead recorder left.
 * The bytes are parse_spool.c's.  Not thread-safe: deliver.c serialises.
 */
#ifndef SM_SPOOL_H
#define SM_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "parse.h"
#include "sink.h"

typedef struct sm_spool sm_spool;

#define SM_SPOOL_DIR_DEFAULT "/var/tmp/scopemeter"
#define SM_SPOOL_MAX_MB_DEFAULT 64
/* A segment file holds at most this share of the bound: past the bound the
 * oldest segment goes, whole (counted), and the files stay self-contained. */
#define SM_SPOOL_SEGMENTS 4

typedef struct sm_spool_counts {
    uint64_t spooled;   /* records moved from the ring into the spool */
    uint64_t replayed;  /* of them, taken back out for delivery (delivered or refused) */
    uint64_t dropped;   /* of them, lost: the bound (oldest segment), a write error */
    uint64_t left;      /* of them, still in the files (for `scopemeter sync`) */
} sm_spool_counts;

/* The spool of run_id and rank from SCOPEMETER_SPOOL_DIR and
 * SCOPEMETER_SPOOL_MAX_MB (0: off, *out NULL).  No file yet: the first put
 * makes the directory and checks it is not a tmpfs. */
SM_HIDDEN int sm__spool_new(const char *run_id, int rank, sm_spool **out);
/* Appends n entries (strings from ring) after the records already there,
 * each chunk written through to disk and dropped from the page cache.
 * 0; < 0 when the spool is unusable (said once; nothing was taken). */
SM_HIDDEN int sm__spool_put(sm_spool *s, const sm_ring *ring, const sm_entry *e, size_t n,
                           int64_t step_base);
/* Records not replayed yet. */
SM_HIDDEN uint64_t sm__spool_pending(const sm_spool *s);
/* The oldest records not replayed yet (within one frame), up to cap; 0 when
 * none.  Their ids are the ring's (same process). */
SM_HIDDEN size_t sm__spool_read(sm_spool *s, sm_entry *out, size_t cap);
/* The first used records of the last read are done (delivered or refused):
 * the commit in the file moves past them; an emptied segment is removed. */
SM_HIDDEN void sm__spool_commit(sm_spool *s, size_t used);
SM_HIDDEN void sm__spool_counts(const sm_spool *s, sm_spool_counts *out);
SM_HIDDEN const char *sm__spool_dir(const sm_spool *s);
/* Closes every file (its lock goes with it); a segment with nothing left is
 * removed, the others stay for `scopemeter sync`.  Frees s. */
SM_HIDDEN void sm__spool_free(sm_spool *s);

/* `scopemeter sync`: delivers the spool file at path to its run at the
 * http(s) tracking URI, from its commit on, committing after each batch the
 * store took, and removes it when all is delivered.  line gets what became
 * of it (one line, no prefix).  0 delivered and removed; 1 not all of it
 * delivered and the file kept: held by a live recorder, not a spool file,
 * another version (left as it is), or damaged (what reads is delivered, the
 * file is renamed to path.damaged, out of the next sync's way); < 0 the store
 * did not take it (the file is kept from its commit).  writer (may be NULL)
 * gets the file's header when no live recorder held it and the store
 * answered (delivered or damaged), else run "". */
SM_HIDDEN int sm__spool_sync_file(const char *path, const char *uri, double timeout_s,
                                 char *line, size_t cap, sm_spool_header *writer);

#endif
