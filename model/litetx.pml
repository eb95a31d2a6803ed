/*
 * litetx.pml: a Promela model of the litetx commit protocol (docs/protocol.md), checked by Spin
 * (model/check.sh; the ctest entries are in model/CMakeLists.txt).
 *
 * Actors: coordinators T1 and T2 (engine/coordinator.cpp), collectors G1 and G2
 * (gc/collector.cpp + engine/repair.cpp), one read-committed reader (engine/reads.cpp), and, once
 * they have all stopped, a final healthy collector run in init (progress). Init also delivers a
 * record create that was lost on its way and arrives late.
 *
 * Documents: A (live, a counter at 0) and B (absent).
 *   T1: adjust A by +1, insert B (value 1).
 *   T2: adjust A by +2, delete B.
 * Each store call is one atomic step on one document or record. Revisions are per key and never
 * reused (the counter survives an erase).
 *
 * Two commit paths, chosen by LITETX_PARALLEL for both coordinators:
 *
 * Classic (LITETX_PARALLEL=0; the path of transactions with checks, and the parallel path's
 * fallback). Pre-read and wait for or settle a holder on the spot (contention), the record
 * create (pending, with the worklist; a lost reply adopts only the bytes sent and never creates
 * again), a lease extension before an apply, the applies (sent in either order, each then
 * handled on its own: lost reply -> re-read, conflict -> reacquire and record the new entry),
 * the flip pending -> committed (lost reply, adopting an in-doubt extension), Commit's return
 * at the flip, then the finisher (finish each document, outcome marker) as the same actor. The
 * rollback: mark aborted, reverse each sent apply, outcome marker.
 *
 * Parallel (LITETX_PARALLEL=1). The record create (staging, with the worklist) and the applies
 * go out in one batch and land in any order, each on its own; a crash stops those not landed
 * yet; a reply or a request may be lost; a create lost on its way may land late (or never). A
 * hold written by this path carries a deadline (hx). The transaction is committed once the
 * create and every apply replied OK: Commit returns OK there, and the finisher flips the record
 * staging -> committed and goes on as in the classic path.
 * - An apply that did not reply OK: the coordinator moves the record staging -> pending (its own
 *   CAS) and goes on by the classic path from the replies it got. When that write cannot be
 *   made, the record it finds decides: committed (proved by a resolver or a reader) -> OK;
 *   aborted -> reverse the landed holds, a failure (kAborted); absent, or still staging after
 *   the retries -> kUnknown.
 * - A lost create reply: the coordinator reads the record. Staging -> it landed; committed, even
 *   as an outcome marker -> it landed and the commit was proved: OK; aborted -> fenced; absent
 *   -> it fences the record itself with an aborted outcome marker; when that cannot be written
 *   either -> kUnknown (the create may still land, and be proved committed). Fenced: the
 *   coordinator reverses its landed holds and reports a failure (kUnavailable after its own
 *   fence, kAborted after another's).
 * - A hold whose record is absent is left alone until its deadline; past it, a contender or the
 *   collector's sweep first fences the record (an aborted marker where it is absent), then
 *   undoes the hold from its own undo data.
 * - A stale staging record is resolved (by a collector, or by a contender on the spot): each
 *   listed document is held by it or fenced so that its apply can no longer land (rewritten
 *   unchanged at the revision read, or a placeholder where it was absent); then the record is
 *   CAS'd to committed if every document was held, else to aborted.
 * - The reader, on a staging holder: every listed document held -> it proves the commit (CAS
 *   staging -> committed) and returns the new image; otherwise it reads the record again and
 *   returns the pre-image only if it is still staging at the same revision. On a committed
 *   outcome marker it reads the document again: the same holder is a dangling hold (read through
 *   its undo data), otherwise it returns the new image of its first read. On an aborted marker,
 *   a fence or an absent record it reads the document again from the start (the same holder: a
 *   dangling hold).
 *
 * Collectors (both paths): claim a stale pending record (CAS to aborted), finish or reverse
 * each document (fencing those the coordinator may still write), the outcome marker, the
 * marker's erase; the sweep undoes dangling holds and purges tombstones and placeholders.
 *
 * Faults (bounded by the scope): a crash before any write of a coordinator or collector; a
 * write's reply lost after it landed, or its request lost before; a record's lease (gc_at) and
 * a hold's deadline running out at any moment.
 *
 * Properties (assertions, LITETX_PROP selects one): atomicity, no lost update, read committed,
 * finality (a record never changes outcome, a committed write is never reversed, what the
 * caller was told agrees with the record), no resurrection (no apply lands once the record its
 * coordinator created is settled), progress (a final healthy collector run settles everything
 * within 40 writes). Pan's invalid-end-state check also runs: every actor must be able to end.
 *
 * The retention assumptions (docs/protocol.md §7), as the model takes them:
 * - An outcome marker is erased only once no Create of its record can still come from its
 *   coordinator (cpend: the record create, or the coordinator's own fence, still to be sent;
 *   late: a create lost on its way that may still land). outcome_retention is taken to exceed
 *   the longest pause of a coordinator and the longest a request stays in flight. The same
 *   assumption lets a fence of an absent record check, in one step, that the hold it read is
 *   still there: a record read as absent after its hold was read cannot have been a marker that
 *   was erased in between.
 * - A tombstone or placeholder is purged only once no coordinator that read the document before
 *   it was stamped may still send a write to it (tombstone_retention exceeds a coordinator's
 *   longest pause).
 *
 * Left out, and why:
 * - Versions and expected_version, checks, locks and wait-die: they decide whether a transaction
 *   may commit, not how its writes are made all-or-nothing; a transaction with checks takes the
 *   classic path, which is modelled.
 * - The lease keeper thread (only an extension before an apply), the one-action fast path, more
 *   than two documents or two transactions: each would multiply a state space that already
 *   cannot be searched exhaustively with every fault at once.
 * - Writes delayed in the network after their sender moved on, except the parallel record
 *   create: a lost write lands at once or never. The create is the one write whose late landing
 *   the protocol must fence (an apply's late landing is covered by the resolver's and the
 *   contender's fences, which the model has).
 * - The coordinator's guards for a pause longer than the retention (a record found absent, or
 *   a fence that landed, after the record's lease ran out -> kUnknown): under the assumption
 *   above they never change the outcome, and a kUnknown is always a sound report.
 * - kUnavailable as a store reply (a failed write is a lost one: kUnknown), the marker's `by` and
 *   the Outcome calls (the final state and the ghost variables stand in for them).
 * - Retry limits are scaled down to 2. A collector's or contender's read-then-CAS on one
 *   document is one atomic step (a write in between would make the CAS fail and the loop read
 *   again, which is the step taken after that write).
 * - Mutations 18 and 19 (below) only abort live transactions: no safety property fails, so they
 *   are in the model but not tests. Mutations 3 and 9 are not tests either: their trails (a
 *   lost flip reply, then the record settled and its marker erased before the coordinator
 *   reads it; a collector crashing between its claim and its marker) have not been reached by
 *   the time-bounded search.
 *
 * Scope, mutation and properties are set from the environment (see below and check.sh).
 */

/* The scope and the mutation are read from the environment when the search starts (init), so
 * that one compiled verifier serves every run: LITETX_MAXCRASH, LITETX_MAXLOST, LITETX_MAXEXP,
 * LITETX_MAXEXT, LITETX_MAXRUNS, LITETX_READS, LITETX_PARALLEL (1: parallel commit, 0: classic),
 * LITETX_MUT (a mutation number, M_* below) and LITETX_PROP (0: every property; n: only property
 * n's assertions). */
hidden byte maxcrash = 1, maxlost = 1, maxexp = 2, maxext = 1, maxruns = 1, reads = 3;
hidden byte mut = 0, prop = 0, parallel = 0;
#define MAXCRASH maxcrash
#define MAXLOST maxlost
#define MAXEXP maxexp
#define MAXEXT maxext
#define MAXRUNS maxruns
#define READS reads

/* mutations: each breaks the protocol as a real bug would */
#define M_SKIP_CLAIM 1          /* the collector reverses a stale pending record without claiming it */
#define M_BLIND_FLIP 2          /* the commit flip is written without checking the record's revision */
#define M_UNKNOWN_AS_FAIL 3     /* a lost flip reply that cannot be resolved is reported as a failure */
#define M_GC_FINISHES_ABORTED 4 /* the collector finishes the documents of an aborted record */
#define M_STALE_REAPPLY 5       /* after an apply conflict, the old value is written at the new revision */
#define M_READER_NEW 6          /* the reader returns the held (new) image of a pending transaction */
#define M_NO_FENCE 7            /* the collector reverses but does not fence */
#define M_PURGE_NO_AGE 8        /* tombstones and placeholders are purged without the age check */
#define M_GC_SKIPS_ABORTED 9    /* the collector leaves aborted records alone */
#define M_GC_SKIPS_COMMITTED 10 /* the collector leaves committed records alone (never finishes) */
#define M_READER_OLD 11         /* the reader returns the pre-image of a committed holder */
/* mutations of the parallel protocol */
#define M_RESOLVER_NO_FENCE 12  /* a resolver aborts a staging record without fencing the unheld document */
#define M_READER_NO_CAS 13      /* the reader takes "every document held" as committed without the record CAS */
#define M_BLIND_PENDING 14      /* the coordinator's fallback staging -> pending is written without the revision check */
#define M_ACK_RECORD_ONLY 15    /* the coordinator reports OK once the record create replied OK, whatever the applies did */
#define M_CONTENDER_NO_FENCE 16 /* a hold whose record is absent is undone (past its deadline) without fencing the record */
#define M_READER_NO_REREAD 17   /* the reader returns the pre-image when some document is not held, without reading the record again */
/* 18 and 19 cost liveness only (a live transaction is aborted): no property fails */
#define M_NO_DEADLINE 18        /* a hold whose record is absent is fenced at once, before its deadline */
#define M_RESOLVE_LIVE 19       /* a staging record is resolved before its gc_at */
#define M_NO_SELF_FENCE 20      /* a lost record create found absent is reported as a failure without fencing the record */
#define M_DONE_AS_FENCED 21     /* a lost record create found as a committed marker is taken as fenced (kAborted) */
#define M_LOST_CREATE_UNAVAILABLE 22 /* a lost record create that could not be fenced is reported kUnavailable */
/* the record states a mutated collector does not settle */
#define GC_SKIPS(st) ((mut == M_GC_SKIPS_ABORTED && (st) == S_ABRT) || \
                      (mut == M_GC_SKIPS_COMMITTED && (st) == S_COMM))

#define NT 2
#define ND 2
#define DA 0
#define DB 1
#define MAXATT 2     /* attempts of a forward retry loop (Options::max_attempts, scaled down) */
#define MAXRACE 2    /* apply conflicts before kConflict (kMaxRaces, scaled down) */

/* properties */
#define P_ATOM 1
#define P_LOST 2
#define P_READ 3
#define P_FINAL 4
#define P_RESUR 5
#define P_PROG 6
#define ON(p) (prop == 0 || prop == (p))

/* document kinds (a worklist entry's prior) */
#define K_ABSENT 0
#define K_GONE 1
#define K_DEL 2
#define K_LIVE 3
/* actions */
#define OP_ADJ 1
#define OP_INS 2
#define OP_DEL 3
#define OPOF(t, d) ((d) == DA -> OP_ADJ : ((t) == 1 -> OP_INS : OP_DEL))
/* record states */
#define S_PEND 1
#define S_COMM 2
#define S_ABRT 3
#define S_STAG 4
#define BY_COORD 1
#define BY_OTHER 2
/* store call results (and what callers make of them) */
#define R_OK 1
#define R_UNK 2
#define R_CONF 3
#define R_DONE 4
#define R_WAIT 5
#define R_FAIL 6
/* what a coordinator reports to its caller */
#define REP_OK 1
#define REP_FAIL 2
#define REP_UNK 3

#define WBIT(t) (1 << ((t) - 1))
#define R(t) rec[(t) - 1]
#define COM(t) (fin[(t) - 1] == S_COMM)
#define COMBITS ((COM(1) -> 1 : 0) + (COM(2) -> 2 : 0))

typedef Doc {
  bit ex;       /* present in the store */
  byte rev;     /* store revision (per key, never reused) */
  byte tx;      /* _ltx.tx: holding transaction (0: none) */
  bit dlg;      /* _ltx.dlg */
  bit del;      /* _ltx.del: tombstone */
  bit gone;     /* _ltx.gone: placeholder */
  byte val;     /* the user value */
  byte uo;      /* _ltx.u of a hold: the action, */
  byte uk;      /* the prior kind, */
  byte uv;      /* the prior value */
  bit hx;       /* _ltx.u.x: the hold carries a deadline (written by the parallel protocol) */
  bit stamped;  /* _ltx.at set (tombstone or placeholder) */
  byte sw;      /* ghost: coordinators that pre-read before the stamp and may still write */
};

typedef Rec {
  bit ex;
  byte rev;
  byte st;      /* staging, pending, committed, aborted */
  bit done;     /* outcome marker (worklist emptied) */
  byte by;
  byte gen;     /* the coordinator's record writes (gc_at, worklist): identifies its bytes */
  bit exp;      /* time: the collector's clock has passed gc_at */
  bit wx[ND];   /* worklist entry per document: existed at the pre-read, */
  byte wr[ND];  /* its revision then ("rev"), */
  byte wk[ND];  /* prior kind, */
  byte wv[ND];  /* prior value */
};

Doc doc[ND];
Rec rec[NT];
byte win[ND];        /* ghost: coordinators whose apply on the document may still land */
byte fin[NT];        /* ghost: the first outcome a record took (0: still pending) */
byte rep[NT];        /* ghost: what each coordinator reported */
bit dexp[NT];        /* time: the deadline of the transaction's holds (its first gc_at) has passed */
bit rland[NT];       /* ghost: the coordinator's record create landed */
bit late[NT];        /* a record create lost on its way that may still arrive (init delivers it) */
bit cpend[NT];       /* ghost: the coordinator may still send a Create of its record (the record
                      * create, or its own fence after a lost create reply) */
byte crashes, lost, exps;
bit final;           /* the final healthy collector run: no crashes, no lost replies */
byte fsteps;         /* writes of the final run */

hidden byte atomicity_ok, lost_update_ok, read_committed_ok, finality_ok, committed_kept_ok,
           outcome_ok, no_resurrection_ok, progress_ok;

/* ---- store-call helpers ---- */

/* Inside the atomic step of a write: a crash right before it (bounded). */
#define CRASHOPT (!final && crashes < MAXCRASH) -> crashes++; goto dead
/* In the final run, a bound on the writes (a healthy collector must end). */
#define FSTEP \
  if \
  :: final -> fsteps++; progress_ok = (fsteps < 40); assert(!ON(P_PROG) || progress_ok) \
  :: else -> skip \
  fi

/* The reply of a write that landed: OK, or lost (the caller sees kUnknown). */
inline LAND() {
  if
  :: res = R_OK
  :: (!final && lost < MAXLOST) -> lost++; res = R_UNK
  fi
}

/* A write request lost on its way: nothing lands, the caller sees kUnknown. */
#define LOSTREQ (!final && lost < MAXLOST) -> lost++; res = R_UNK

inline STAMP(d) {
  doc[d].stamped = 1;
  doc[d].sw = win[d]
}

/* Time: a record's gc_at may pass at any moment (bounded). The deadline of the transaction's
 * holds is its first gc_at, never later than the current one, so it has passed too. */
inline maybe_expire(h) {
  if
  :: (R(h).ex && !R(h).done && !R(h).exp && exps < MAXEXP) -> R(h).exp = 1; dexp[(h) - 1] = 1; exps++
  :: true -> skip
  fi
}

/* Time, for a hold whose record is absent: the hold's deadline may pass (bounded). */
inline maybe_expire_hold(h) {
  if
  :: (!dexp[(h) - 1] && exps < MAXEXP) -> dexp[(h) - 1] = 1; exps++
  :: true -> skip
  fi
}

/* A record write: the state it leaves the record in (claim finality, §6.4). */
inline REC_STATE(t, s) {
  finality_ok = (fin[(t) - 1] == 0 || fin[(t) - 1] == (s));
  assert(!ON(P_FINAL) || finality_ok);
  if
  :: (s) != S_PEND -> fin[(t) - 1] = (s)
  :: else -> skip
  fi
}

/* The staging record of t lands (its worklist was stored when the batch was sent); its gc_at is
 * the holds' deadline. */
inline create_staging(t) {
  R(t).ex = 1; R(t).st = S_STAG; R(t).done = 0; R(t).by = 0; R(t).gen = 0;
  R(t).exp = dexp[(t) - 1]; rland[(t) - 1] = 1; R(t).rev++
}

/* An aborted outcome marker created where the record of t is absent: a fence (by whom). */
inline create_fence_marker(t, who) {
  R(t).ex = 1; R(t).st = S_ABRT; R(t).done = 1; R(t).by = (who); R(t).gen = 0;
  REC_STATE(t, S_ABRT); R(t).rev++
}

/* worklist.cpp Finished: the reference cleared; a pending delete becomes a tombstone. */
inline do_finish(d) {
  doc[d].tx = 0; doc[d].uo = 0; doc[d].uk = 0; doc[d].uv = 0; doc[d].hx = 0;
  if
  :: doc[d].dlg -> doc[d].dlg = 0; doc[d].del = 1; doc[d].val = 0; STAMP(d)
  :: else -> skip
  fi
}

/* worklist.cpp Reversed: restore the prior values; an insert becomes a placeholder (or a
 * tombstone if it was one); a delete loses dlg. */
inline do_reverse(d, op, pk, pv) {
  doc[d].tx = 0; doc[d].uo = 0; doc[d].uk = 0; doc[d].uv = 0; doc[d].hx = 0;
  if
  :: (op) == OP_ADJ -> doc[d].val = (pv)
  :: (op) == OP_INS ->
     doc[d].val = 0;
     if
     :: (pk) == K_DEL -> doc[d].del = 1; doc[d].gone = 0
     :: else -> doc[d].gone = 1; doc[d].del = 0
     fi;
     STAMP(d)
  :: (op) == OP_DEL -> doc[d].dlg = 0
  fi
}

/* ---- settling a held document (engine/repair.cpp) ----
 * SettleHeld and ReverseDocument loop "read the document, decide, CAS at the revision read,
 * then read again". The read and the CAS are merged into one atomic step: had anything written
 * the document in between, the CAS would fail and the loop read again, which is the merged step
 * taken after that write; a crash in between is a crash before the read. */

/* FinishDocument(key, h) */
inline settle_finish(d, h) {
  do
  :: atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (doc[d].ex && doc[d].tx == (h)) -> do_finish(d); doc[d].rev++; LAND()
          :: else -> res = R_DONE
          fi
       fi
     }
     if
     :: res == R_DONE -> break
     :: else -> skip
     fi
  od
}

/* UndoDanglingHold(key, h): reverse from the hold's own undo data (copied first: do_reverse
 * clears the document's copy before it uses its arguments). */
inline undo_dangling(d, h) {
  do
  :: atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (doc[d].ex && doc[d].tx == (h)) ->
             ud_o = doc[d].uo; ud_k = doc[d].uk; ud_v = doc[d].uv;
             do_reverse(d, ud_o, ud_k, ud_v); doc[d].rev++; LAND()
          :: else -> res = R_DONE
          fi
       fi
     }
     if
     :: res == R_DONE -> break
     :: else -> skip
     fi
  od
}

/* ReverseDocument(work, h): reverse if held by h, else fence (§6.3). */
inline reverse_document(d, h, wx, wr, wk, wv) {
  rd_fenced = 0;
  do
  :: atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (!doc[d].ex && ((wx) || rd_fenced)) -> res = R_DONE
          :: (!doc[d].ex && !(wx) && !rd_fenced) ->
             if
             :: mut == M_NO_FENCE -> res = R_DONE
             :: else ->
             /* take the key first with a "gone" placeholder */
             doc[d].ex = 1; doc[d].tx = 0; doc[d].dlg = 0; doc[d].del = 0; doc[d].gone = 1;
             doc[d].val = 0; doc[d].uo = 0; doc[d].uk = 0; doc[d].uv = 0; doc[d].hx = 0; STAMP(d);
             doc[d].rev++; LAND();
             if
             :: res == R_OK -> rd_fenced = 1
             :: else -> skip
             fi
             fi
          :: (doc[d].ex && doc[d].tx == (h)) ->
             do_reverse(d, OPOF(h, d), (wk), (wv)); doc[d].rev++; LAND()
          :: (doc[d].ex && doc[d].tx != (h) && (wx) && doc[d].rev == (wr) && !rd_fenced) ->
             if
             :: mut == M_NO_FENCE -> res = R_DONE
             :: else ->
             /* still as the coordinator read it: rewrite it unchanged */
             doc[d].rev++; LAND();
             if
             :: res == R_OK -> rd_fenced = 1
             :: else -> skip
             fi
             fi
          :: else -> res = R_DONE
          fi
       fi
     }
     if
     :: res == R_DONE -> break
     :: else -> skip
     fi
  od
}

/* The resolver's look at one listed document of a stale staging record: held by h (rd_held), or
 * made sure that h's apply can never land (a fence): still at the revision h read -> rewritten
 * unchanged; absent where h would create it -> a "gone" placeholder; otherwise h's CAS can no
 * longer match. After a fence write (landed or not) the document is looked at again: the apply
 * may have landed first, and then it is held. */
inline fence_document(d, h, wx, wr) {
  rd_fenced = 0; rd_held = 0;
  do
  :: atomic {
       if
       :: (doc[d].ex && doc[d].tx == (h)) -> rd_held = 1; res = R_DONE
       :: (!(doc[d].ex && doc[d].tx == (h)) && mut != M_RESOLVER_NO_FENCE && !rd_fenced &&
           (((wx) && doc[d].ex && doc[d].rev == (wr)) || (!(wx) && !doc[d].ex))) ->
          if
          :: CRASHOPT
          :: LOSTREQ
          :: true -> FSTEP;
             if
             :: (wx) -> skip   /* rewritten unchanged: only the revision moves */
             :: else ->
                doc[d].ex = 1; doc[d].tx = 0; doc[d].dlg = 0; doc[d].del = 0; doc[d].gone = 1;
                doc[d].val = 0; doc[d].uo = 0; doc[d].uk = 0; doc[d].uv = 0; doc[d].hx = 0;
                STAMP(d)
             fi;
             doc[d].rev++; LAND();
             if
             :: res == R_OK -> rd_fenced = 1
             :: else -> skip
             fi
          fi
       :: else -> res = R_DONE   /* not held, and h's apply can no longer land */
       fi
     }
     if
     :: res == R_DONE -> break
     :: else -> skip
     fi
  od
}

/* A hold of h on d whose record is absent, past its deadline: fence the record, i.e. create it
 * as an aborted outcome marker by the claimer. res = R_OK (created), R_CONF (the record exists:
 * look again) or R_UNK.
 * Outcome retention (§7): a marker is erased long after anyone could still act on a read of a
 * hold made before the marker was written. So a record read as absent after the hold was read
 * belongs to a transaction whose hold is still there when the fence is sent; the merged step
 * checks that the hold is still there (otherwise the record existed meanwhile: look again). */
inline fence_record(d, h) {
  atomic {
    if
    :: CRASHOPT
    :: LOSTREQ
    :: true -> FSTEP;
       if
       :: (!R(h).ex && doc[d].ex && doc[d].tx == (h)) -> create_fence_marker(h, BY_OTHER); LAND()
       :: else -> res = R_CONF
       fi
    fi
  }
}

/* RepairTransaction(h): the collector's settling of one record; also used on the spot. */
inline repair(h) {
  do
  :: atomic {
       rp_ex = R(h).ex; rp_rev = R(h).rev; rp_st = R(h).st; rp_done = R(h).done;
       maybe_expire(h);
       rp_exp = R(h).exp;
       rp_i = 0;
       do
       :: rp_i < ND ->
          rp_wx[rp_i] = R(h).wx[rp_i]; rp_wr[rp_i] = R(h).wr[rp_i];
          rp_wk[rp_i] = R(h).wk[rp_i]; rp_wv[rp_i] = R(h).wv[rp_i]; rp_i++
       :: else -> break
       od
     }
     if
     :: !rp_ex -> break
     :: (rp_ex && rp_done) ->
        if
        :: true -> break   /* outcome_retention not yet passed */
        :: (!cpend[(h) - 1] && !late[(h) - 1]) ->
           /* passed: erase the marker. The retention exceeds the longest pause of a coordinator
            * (§7): no Create of h's record by its coordinator is still to come. */
           atomic {
             if
             :: CRASHOPT
             :: LOSTREQ
             :: true -> FSTEP;
                if
                :: (R(h).ex && R(h).rev == rp_rev) -> R(h).ex = 0; R(h).rev++; LAND()
                :: else -> res = R_CONF
                fi
             fi
           }
           if
           :: res == R_OK -> break
           :: else -> skip
           fi
        fi
     :: (rp_ex && !rp_done && !rp_exp && !(mut == M_RESOLVE_LIVE && rp_st == S_STAG)) ->
        break   /* not stale */
     :: (rp_ex && !rp_done && rp_exp && GC_SKIPS(rp_st)) -> break
     :: (rp_ex && !rp_done && (rp_exp || (mut == M_RESOLVE_LIVE && rp_st == S_STAG)) &&
         !GC_SKIPS(rp_st)) ->
        if
        :: rp_st == S_PEND ->
           if
           :: mut == M_SKIP_CLAIM -> rp_st = S_ABRT; res = R_OK
           :: else ->
           atomic {
             if
             :: CRASHOPT
             :: LOSTREQ
             :: true -> FSTEP;
                if
                :: (R(h).ex && R(h).rev == rp_rev) ->
                   R(h).st = S_ABRT; R(h).by = BY_OTHER; REC_STATE(h, S_ABRT);
                   R(h).rev++; rp_rev = R(h).rev; LAND()
                :: else -> res = R_CONF
                fi
             fi
           };
           if
           :: res == R_OK -> rp_st = S_ABRT
           :: else -> skip
           fi
           fi
        :: rp_st == S_STAG ->
           /* prove the commit (every listed document held) or make it impossible (fence) */
           rp_i = 0; rp_all = 1;
           do
           :: rp_i < ND ->
              fence_document(rp_i, h, rp_wx[rp_i], rp_wr[rp_i]);
              if
              :: !rd_held -> rp_all = 0
              :: else -> skip
              fi;
              rp_i++
           :: else -> break
           od;
           atomic {
             if
             :: CRASHOPT
             :: LOSTREQ
             :: true -> FSTEP;
                if
                :: (R(h).ex && R(h).rev == rp_rev) ->
                   if
                   :: rp_all -> R(h).st = S_COMM; REC_STATE(h, S_COMM)
                   :: else -> R(h).st = S_ABRT; R(h).by = BY_OTHER; REC_STATE(h, S_ABRT)
                   fi;
                   R(h).rev++; rp_rev = R(h).rev; LAND()
                :: else -> res = R_CONF
                fi
             fi
           };
           if
           :: res == R_OK -> rp_st = (rp_all -> S_COMM : S_ABRT)
           :: else -> skip   /* the record changed, or the reply was lost: start over */
           fi
        :: else -> res = R_OK
        fi;
        if
        :: res != R_OK -> skip   /* read the record again */
        :: else ->
           rp_i = 0; rp_moved = 0;
           do
           :: rp_i < ND ->
              atomic {
                if
                :: !R(h).ex -> rp_moved = 2
                :: (R(h).ex && R(h).rev != rp_rev) -> rp_moved = 1
                :: else -> skip
                fi
              }
              if
              :: rp_moved != 0 -> break
              :: else -> skip
              fi;
              if
              :: (rp_st == S_COMM || mut == M_GC_FINISHES_ABORTED) -> settle_finish(rp_i, h)
              :: else -> reverse_document(rp_i, h, rp_wx[rp_i], rp_wr[rp_i], rp_wk[rp_i], rp_wv[rp_i])
              fi;
              rp_i++
           :: else -> break
           od;
           if
           :: rp_moved == 2 -> break
           :: rp_moved == 1 -> skip
           :: else ->
              atomic {
                if
                :: CRASHOPT
                :: LOSTREQ
                :: true -> FSTEP;
                   if
                   :: (R(h).ex && R(h).rev == rp_rev) ->
                      R(h).done = 1; REC_STATE(h, rp_st); R(h).rev++; LAND()
                   :: else -> res = R_CONF
                   fi
                fi
              };
              if
              :: res == R_OK -> break
              :: else -> skip
              fi
           fi
        fi
     fi
  od
}

#define REPAIR_LOCALS \
  byte res; \
  bit rp_ex, rp_done, rp_exp, rd_fenced, rd_held, rp_all; \
  byte rp_rev, rp_st, rp_i, rp_moved, ud_o, ud_k, ud_v; \
  bit rp_wx[ND]; byte rp_wr[ND]; byte rp_wk[ND]; byte rp_wv[ND]

/* ---- the coordinator (engine/coordinator.cpp CommitRun) ---- */

/* Read the document into c_* (and open the apply window on it). */
inline read_doc(d) {
  atomic {
    c_ex = doc[d].ex; c_rev = doc[d].rev; c_tx = doc[d].tx; c_val = doc[d].val; c_hx = doc[d].hx;
    c_kind = (!doc[d].ex -> K_ABSENT : (doc[d].gone -> K_GONE : (doc[d].del -> K_DEL : K_LIVE)));
    win[d] = win[d] | WBIT(me)
  }
}

/* contention.cpp AwaitFree + LookAtHolder: res = R_OK (c_* is the free document) or R_CONF
 * (kBusy). */
inline await_free(d) {
  do
  :: read_doc(d);
     if
     :: (c_ex && c_tx != 0 && c_tx != me) ->
        h = c_tx;
        atomic {
          h_ex = R(h).ex; h_done = R(h).done; h_st = R(h).st;
          h_wx = R(h).wx[d]; h_wr = R(h).wr[d]; h_wk = R(h).wk[d]; h_wv = R(h).wv[d];
          if
          :: h_ex -> maybe_expire(h)
          :: (!h_ex && c_hx) -> maybe_expire_hold(h)
          :: (!h_ex && !c_hx) -> skip
          fi;
          h_exp = R(h).exp; h_dx = dexp[h - 1]
        };
        if
        :: (h_done || (!h_ex && (!c_hx || mut == M_CONTENDER_NO_FENCE) && (h_dx || !c_hx))) ->
           undo_dangling(d, h)
        :: (!h_ex && c_hx && (h_dx || mut == M_NO_DEADLINE) && mut != M_CONTENDER_NO_FENCE) ->
           /* a hold whose record is absent, past its deadline: fence the record, then look
            * again (the record is now an outcome marker, and the hold is undone) */
           fence_record(d, h)
        :: (h_ex && !h_done && h_st == S_COMM) -> settle_finish(d, h)
        :: (h_ex && !h_done && h_st == S_ABRT) -> reverse_document(d, h, h_wx, h_wr, h_wk, h_wv)
        :: (h_ex && !h_done && (h_st == S_PEND || h_st == S_STAG) && h_exp) -> repair(h)
        :: ((h_ex && !h_done && (h_st == S_PEND || h_st == S_STAG) && !h_exp) ||
            (!h_ex && c_hx && !h_dx && mut != M_NO_DEADLINE)) ->
           if
           :: skip          /* wait (busy_backoff) and look again */
           :: res = R_CONF; break   /* busy_timeout: kBusy */
           fi
        fi
     :: else -> res = R_OK; break
     fi
  od
}

/* worklist.cpp Prepare: the precondition and the reversing data. res = R_OK or R_FAIL. */
inline prepare(d) {
  if
  :: (OPOF(me, d) == OP_INS && c_kind != K_LIVE) -> res = R_OK
  :: (OPOF(me, d) != OP_INS && c_kind == K_LIVE) -> res = R_OK
  :: else -> res = R_FAIL   /* kConflict (exists) / kNotFound / kDeleted */
  fi;
  if
  :: res == R_OK ->
     if
     :: (mut == M_STALE_REAPPLY && s_prepared[d]) -> skip   /* a retry keeps the old value */
     :: else -> s_pk[d] = c_kind; s_pv[d] = c_val
     fi;
     s_prepared[d] = 1; s_ex[d] = c_ex; s_rrev[d] = c_rev
  :: else -> skip
  fi
}

/* The held image of this coordinator's action on d. */
inline set_held(d) {
  doc[d].ex = 1; doc[d].tx = me; doc[d].uo = OPOF(me, d); doc[d].uk = s_pk[d];
  doc[d].uv = s_pv[d]; doc[d].stamped = 0; doc[d].sw = 0; doc[d].hx = parallel;
  doc[d].dlg = 0; doc[d].del = 0; doc[d].gone = 0;
  if
  :: OPOF(me, d) == OP_ADJ ->
     /* no lost update: the adjust applies to the value it overwrites */
     lost_update_ok = (doc[d].val == s_pv[d]);
     assert(!ON(P_LOST) || lost_update_ok);
     doc[d].val = s_pv[d] + me
  :: OPOF(me, d) == OP_INS -> doc[d].val = 1
  :: OPOF(me, d) == OP_DEL -> doc[d].dlg = 1; doc[d].val = s_pv[d]
  fi
}

/* ReplaceRecord (UpdateRecord): a pending -> pending write of the record: a lease extension
 * (kind 0) or the worklist entry of d after a reacquire (kind 1). res = R_OK, R_CONF (kAborted:
 * someone else wrote the record) or R_FAIL (kUnavailable). */
inline update_record(kind, d) {
  att = 0;
  do
  :: atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (R(me).ex && R(me).rev == myrev) ->
             REC_STATE(me, S_PEND);
             R(me).gen = mygen + 1;
             if
             :: kind == 0 -> R(me).exp = 0
             :: else ->
                R(me).wx[d] = s_ex[d]; R(me).wr[d] = s_rrev[d];
                R(me).wk[d] = s_pk[d]; R(me).wv[d] = s_pv[d]
             fi;
             R(me).rev++; LAND();
             if
             :: res == R_OK -> myrev = R(me).rev; mygen++
             :: else -> skip
             fi
          :: else -> res = R_CONF
          fi
       fi
     };
     if
     :: res == R_OK -> break
     :: else ->
        if
        :: res == R_UNK -> indoubt = 1
        :: else -> skip
        fi;
        atomic { g_ex = R(me).ex; g_rev = R(me).rev; g_st = R(me).st; g_gen = R(me).gen; g_done = R(me).done };
        if
        :: !g_ex -> res = R_CONF; break
        :: (g_ex && !g_done && g_st == S_PEND && g_gen == mygen + 1 && g_rev != myrev) ->
           /* our write whose reply was lost landed */
           myrev = g_rev; mygen++; indoubt = 0; res = R_OK; break
        :: (g_ex && g_rev != myrev && !(!g_done && g_st == S_PEND && g_gen == mygen + 1)) ->
           res = R_CONF; break
        :: (g_ex && g_rev == myrev) ->
           att++;
           if
           :: att >= MAXATT -> res = R_FAIL; break
           :: else -> skip
           fi
        fi
     fi
  od
}

/* MarkDone: the outcome marker of state s, from the record as stored. */
inline mark_done(s, bounded) {
  att = 0;
  do
  :: atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (R(me).ex && R(me).rev == myrev) ->
             R(me).done = 1; REC_STATE(me, s); R(me).rev++; LAND()
          :: else -> res = R_CONF
          fi
       fi
     };
     if
     :: res == R_OK -> break
     :: else ->
        atomic { g_ex = R(me).ex; g_rev = R(me).rev; g_st = R(me).st; g_done = R(me).done };
        if
        :: (!g_ex || g_done || g_st != (s)) -> break
        :: else -> myrev = g_rev
        fi;
        if
        :: bounded -> att++
        :: else -> skip
        fi;
        if
        :: att >= MAXATT -> break
        :: else -> skip
        fi
     fi
  od
}

/* ReverseOne: reverse d if it still carries this transaction's reference. */
inline reverse_one(d) {
  ro_known = s_landed[d]; ro_rev = s_hrev[d];
  do
  :: if
     :: !ro_known ->
        atomic { c_ex = doc[d].ex; c_tx = doc[d].tx; c_rev = doc[d].rev };
        if
        :: (!c_ex || c_tx != me) -> break
        :: else -> ro_rev = c_rev
        fi
     :: else -> skip
     fi;
     atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (doc[d].ex && doc[d].rev == ro_rev) ->
             do_reverse(d, OPOF(me, d), s_pk[d], s_pv[d]); doc[d].rev++; LAND()
          :: else -> res = R_CONF
          fi
       fi
     };
     ro_known = 0;
     if
     :: res == R_OK -> break
     :: else -> skip
     fi
  od
}

/* One apply of d: the held image, a CAS at the pre-read revision (or a Create). */
inline apply_step(d) {
  atomic {
    s_sent[d] = 1;
    if
    :: CRASHOPT
    :: LOSTREQ
    :: true -> FSTEP;
       if
       :: ((s_ex[d] && doc[d].ex && doc[d].rev == s_rrev[d]) || (!s_ex[d] && !doc[d].ex)) ->
          /* no resurrection: no apply lands once the record this coordinator created is
           * settled (a parallel apply may land before the record, or after a fence marker
           * took the place of a record that never landed: that hold is undone as dangling) */
          no_resurrection_ok = !(rland[me - 1] && (!R(me).ex || R(me).done));
          assert(!ON(P_RESUR) || no_resurrection_ok);
          set_held(d); doc[d].rev++;
          LAND();
          if
          :: res == R_OK ->
             /* known to have landed: nothing more will be sent for d */
             s_landed[d] = 1; s_hrev[d] = doc[d].rev; win[d] = win[d] & (255 - WBIT(me))
          :: else -> skip
          fi
       :: else -> res = R_CONF
       fi
    fi
  }
}

/* The coordinator gives up its windows: it sends nothing more (a record create lost on its way
 * may still arrive). */
inline close_windows() {
  atomic {
    cpend[me - 1] = 0;
    i = 0;
    do
    :: i < ND ->
       win[i] = win[i] & (255 - WBIT(me)); doc[i].sw = doc[i].sw & (255 - WBIT(me)); i++
    :: else -> break
    od
  }
}

proctype Coord(byte me) {
  REPAIR_LOCALS;
  byte d, i, h, att, races, nexts, first;
  bit c_ex, c_hx; byte c_rev, c_tx, c_kind, c_val;
  bit h_ex, h_done, h_exp, h_wx, h_dx; byte h_st, h_wr, h_wk, h_wv;
  bit g_ex, g_done; byte g_rev, g_st, g_gen;
  bit s_ex[ND], s_sent[ND], s_landed[ND], s_prepared[ND];
  byte s_rrev[ND], s_pk[ND], s_pv[ND], s_hrev[ND];
  byte myrev, mygen;
  bit settled, found_comm, maybe, indoubt, ro_known, allf, p_comm;
  byte ro_rev, pend, p_rec;
  byte p_ap[ND];   /* the batch's reply for each apply (0: none, or already handled) */

  /* 1. pre-read every document in action order */
  d = 0;
  do
  :: d < ND ->
     await_free(d);
     if
     :: res != R_OK -> rep[me - 1] = REP_FAIL; goto finish   /* kBusy */
     :: else -> skip
     fi;
     prepare(d);
     if
     :: res != R_OK -> rep[me - 1] = REP_FAIL; goto finish   /* precondition */
     :: else -> skip
     fi;
     d++
  :: else -> break
  od;

  if
  :: parallel -> goto batch
  :: else -> skip
  fi;

  /* 2. record create */
  atomic {
    if
    :: CRASHOPT
    :: LOSTREQ
    :: true -> FSTEP;
       if
       :: !R(me).ex ->
          R(me).ex = 1; R(me).st = S_PEND; R(me).done = 0; R(me).by = 0; R(me).gen = 0;
          R(me).exp = 0;
          i = 0;
          do
          :: i < ND ->
             R(me).wx[i] = s_ex[i]; R(me).wr[i] = s_rrev[i];
             R(me).wk[i] = s_pk[i]; R(me).wv[i] = s_pv[i]; i++
          :: else -> break
          od;
          R(me).rev++; rland[me - 1] = 1; LAND();
          if
          :: res == R_OK -> myrev = R(me).rev
          :: else -> skip
          fi
       :: else -> res = R_CONF
       fi
    fi
  };
  if
  :: res == R_OK -> skip
  :: res == R_CONF -> rep[me - 1] = REP_FAIL; goto finish   /* id collision */
  :: res == R_UNK ->
     atomic { g_ex = R(me).ex; g_rev = R(me).rev; g_st = R(me).st; g_gen = R(me).gen;
              g_done = R(me).done };
     if
     :: !g_ex -> rep[me - 1] = REP_FAIL; goto finish   /* never created again */
     :: (g_ex && g_st == S_PEND && !g_done && g_gen == 0) -> myrev = g_rev   /* as sent */
     :: else -> rep[me - 1] = REP_FAIL; goto finish   /* claimed meanwhile: kAborted */
     fi
  fi;

  /* 3. apply every write: one batch, whose writes may land in any order. The batch is
   * modelled as the applies in an order chosen nondeterministically (first, then the other);
   * each one that did not land is then handled on its own (ApplyOne), as in the code. */
  if
  :: first = 0
  :: first = 1
  fi;

applies:
  /* (the parallel fallback enters here, in action order, for the applies that did not reply OK
   * in the batch, starting from the reply each got) */
  i = 0;
  do
  :: (i < ND && s_landed[(first + i) % ND]) -> i++
  :: (i < ND && !s_landed[(first + i) % ND]) ->
     d = (first + i) % ND;
     /* 3a. lease extension */
     if
     :: nexts < MAXEXT ->
        nexts++;
        update_record(0, d);
        if
        :: res != R_OK -> goto rollback
        :: else -> skip
        fi
     :: true -> skip
     fi;
     att = 0; races = 0;
     do
     :: if
        :: p_ap[d] != 0 -> res = p_ap[d]; p_ap[d] = 0
        :: else -> apply_step(d)
        fi;
        if
        :: res == R_OK -> break
        :: res == R_UNK ->
           atomic { c_ex = doc[d].ex; c_tx = doc[d].tx; c_rev = doc[d].rev };
           if
           :: (c_ex && c_tx == me) ->
              s_landed[d] = 1; s_hrev[d] = c_rev; win[d] = win[d] & (255 - WBIT(me)); break
           :: ((s_ex[d] && c_ex && c_rev == s_rrev[d]) || (!s_ex[d] && !c_ex)) ->
              att++;
              if
              :: att >= MAXATT -> goto rollback   /* kUnavailable */
              :: else -> skip
              fi
           :: else -> res = R_CONF
           fi
        :: else -> skip
        fi;
        if
        :: res == R_CONF ->
           /* Reacquire: wait for the document, evaluate again, record the new entry */
           races++;
           if
           :: races >= MAXRACE -> goto rollback   /* kConflict */
           :: else -> skip
           fi;
           await_free(d);
           if
           :: res != R_OK -> goto rollback
           :: else -> skip
           fi;
           if
           :: (c_ex && c_tx == me) ->
              s_landed[d] = 1; s_hrev[d] = c_rev; win[d] = win[d] & (255 - WBIT(me)); break
           :: else -> skip
           fi;
           prepare(d);
           if
           :: res != R_OK -> goto rollback
           :: else -> skip
           fi;
           update_record(1, d);
           if
           :: res != R_OK -> goto rollback
           :: else -> skip
           fi
        :: else -> skip
        fi
     od;
     i++
  :: else -> break
  od;

  /* 5. commit flip: the commit point */
  att = 0; maybe = 0;
  do
  :: atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (R(me).ex && (R(me).rev == myrev || mut == M_BLIND_FLIP)) ->
             R(me).st = S_COMM; REC_STATE(me, S_COMM); R(me).rev++; LAND();
             if
             :: res == R_OK -> myrev = R(me).rev
             :: else -> skip
             fi
          :: else -> res = R_CONF
          fi
       fi
     };
     if
     :: res == R_OK -> break
     :: else ->
        if
        :: res == R_UNK -> maybe = 1
        :: else -> skip
        fi;
        atomic { g_ex = R(me).ex; g_rev = R(me).rev; g_st = R(me).st; g_gen = R(me).gen;
                 g_done = R(me).done };
        if
        :: (g_ex && g_st == S_COMM) -> myrev = g_rev; settled = g_done; break
        :: (g_ex && g_st == S_ABRT) -> goto rollback   /* claimed: kAborted */
        :: (g_ex && g_st == S_PEND && g_rev != myrev && indoubt && g_gen == mygen + 1) ->
           myrev = g_rev; mygen++; indoubt = 0;   /* our lost extension landed: flip from it */
           att++;
           if
           :: att >= MAXATT -> goto flip_failed
           :: else -> skip
           fi
        :: (g_ex && g_st == S_PEND && g_rev != myrev && !(indoubt && g_gen == mygen + 1)) ->
           goto flip_failed
        :: (g_ex && g_st == S_PEND && g_rev == myrev) ->
           att++;
           if
           :: att >= MAXATT -> goto flip_failed
           :: else -> skip
           fi
        :: !g_ex ->
           if
           :: maybe -> goto flip_failed
           :: else -> goto rollback   /* claimed and settled: kAborted */
           fi
        fi
     fi
  od;

  /* Commit returns here, at the commit point; 6 and 7 are the finisher's (engine/finisher.cpp),
   * modelled as the same actor going on (a crash from here on is a crash after the ack). */
  rep[me - 1] = REP_OK;

finishing:
  /* 6. finish every document; 7. outcome marker */
  allf = 1;
  d = 0;
  do
  :: d < ND ->
     ro_rev = s_hrev[d]; att = 0;
     do
     :: atomic {
          if
          :: CRASHOPT
          :: LOSTREQ
          :: true -> FSTEP;
             if
             :: (doc[d].ex && doc[d].rev == ro_rev) -> do_finish(d); doc[d].rev++; LAND()
             :: else -> res = R_CONF
             fi
          fi
        };
        if
        :: res == R_OK -> break
        :: else ->
           atomic { c_ex = doc[d].ex; c_tx = doc[d].tx; c_rev = doc[d].rev };
           if
           :: (!c_ex || c_tx != me) -> break
           :: else -> ro_rev = c_rev
           fi;
           att++;
           if
           :: att >= MAXATT -> allf = 0; break
           :: else -> skip
           fi
        fi
     od;
     d++
  :: else -> break
  od;
  if
  :: (allf && !settled) -> mark_done(S_COMM, 1)
  :: else -> skip
  fi;
  goto finish;

batch:
  /* ---- the parallel protocol ----
   * 2p. One batch: the record create (state staging, with the worklist) and every apply. Its
   * writes land in any order, each on its own; a crash stops the ones that have not landed yet.
   * The worklist is stored in the (still absent) record slot now, so that a create lost on its
   * way can land later with it. */
  atomic {
    cpend[me - 1] = 1;
    if
    :: !R(me).ex ->
       i = 0;
       do
       :: i < ND ->
          R(me).wx[i] = s_ex[i]; R(me).wr[i] = s_rrev[i];
          R(me).wk[i] = s_pk[i]; R(me).wv[i] = s_pv[i]; i++
       :: else -> break
       od
    :: else -> skip
    fi;
    pend = 7   /* 1: apply A, 2: apply B, 4: the record create */
  };
  do
  :: (pend & 4) ->
     atomic {
       pend = pend & 3;
       if
       :: CRASHOPT
       :: (!final && lost < MAXLOST) ->
          /* lost on its way: kUnknown; it may still land (init delivers it, or never) */
          lost++; res = R_UNK; late[me - 1] = 1
       :: true -> FSTEP;
          if
          :: !R(me).ex ->
             create_staging(me); LAND();
             if
             :: res == R_OK -> myrev = R(me).rev
             :: else -> skip
             fi
          :: else -> res = R_CONF   /* a fence marker took its place */
          fi
       fi;
       p_rec = res
     }
  :: (pend & 1) -> atomic { pend = pend & 6; apply_step(0); p_ap[0] = res }
  :: (pend & 2) -> atomic { pend = pend & 5; apply_step(1); p_ap[1] = res }
  :: pend == 0 -> break
  od;

  /* 4. the record create's reply */
  att = 0;
  do
  :: p_rec == R_OK -> break
  :: p_rec == R_CONF -> goto fenced   /* a contender fenced the record */
  :: p_rec == R_UNK ->
     /* lost reply: read the record */
     atomic { g_ex = R(me).ex; g_rev = R(me).rev; g_st = R(me).st; g_gen = R(me).gen;
              g_done = R(me).done };
     assert(!g_ex || g_st != S_PEND);   /* only this coordinator writes pending */
     if
     :: (g_ex && !g_done && g_st == S_STAG) -> myrev = g_rev; p_rec = R_OK   /* ours: it landed */
     :: (g_ex && g_st == S_COMM && !(g_done && mut == M_DONE_AS_FENCED)) ->
        /* it landed, and a resolver or a reader proved the commit (and perhaps settled it) */
        myrev = g_rev; p_comm = 1; settled = g_done; p_rec = R_OK
     :: (g_ex && g_st == S_COMM && g_done && mut == M_DONE_AS_FENCED) -> goto fenced
     :: (g_ex && g_st == S_ABRT) -> goto fenced
     :: !g_ex ->
        if
        :: mut == M_NO_SELF_FENCE -> rep[me - 1] = REP_FAIL; goto finish
        :: else -> skip
        fi;
        att++;
        if
        :: att > MAXATT -> goto create_lost   /* retries exhausted */
        :: else -> skip
        fi;
        /* absent: fence it with our own aborted outcome marker */
        atomic {
          if
          :: CRASHOPT
          :: LOSTREQ
          :: true -> FSTEP;
             if
             :: !R(me).ex -> create_fence_marker(me, BY_COORD); LAND()
             :: else -> res = R_CONF
             fi
          fi
        };
        if
        :: res == R_OK -> goto fenced
        :: else -> skip   /* read again */
        fi
     fi
  od;
  cpend[me - 1] = 0;
  if
  :: p_comm -> rep[me - 1] = REP_OK; goto finishing
  :: else -> skip
  fi;

  if
  :: ((p_ap[0] == R_OK && p_ap[1] == R_OK) || mut == M_ACK_RECORD_ONLY) ->
     /* the record create and every apply replied OK: committed. Nothing but a commit proof can
      * move the record out of staging now (an abort needs an unheld document to fence). */
     REC_STATE(me, S_COMM);
     rep[me - 1] = REP_OK;
     if
     :: !(p_ap[0] == R_OK && p_ap[1] == R_OK) -> goto fallback   /* the mutation */
     :: else -> skip
     fi;
     /* the flip staging -> committed (the finisher's first write) */
     att = 0;
     do
     :: atomic {
          if
          :: CRASHOPT
          :: LOSTREQ
          :: true -> FSTEP;
             if
             :: (R(me).ex && R(me).rev == myrev) ->
                R(me).st = S_COMM; REC_STATE(me, S_COMM); R(me).rev++; LAND();
                if
                :: res == R_OK -> myrev = R(me).rev
                :: else -> skip
                fi
             :: else -> res = R_CONF
             fi
          fi
        };
        if
        :: res == R_OK -> break
        :: else ->
           atomic { g_ex = R(me).ex; g_rev = R(me).rev; g_st = R(me).st; g_done = R(me).done };
           if
           :: (g_ex && g_st == S_COMM && !g_done) -> myrev = g_rev; break   /* proved, or ours */
           :: (g_ex && g_st == S_STAG && g_rev == myrev) ->
              att++;
              if
              :: att >= MAXATT -> goto finish   /* left to the collector */
              :: else -> skip
              fi
           :: else -> goto finish   /* done (or gone): stop; aborted is impossible */
           fi
        fi
     od;
     goto finishing
  :: else -> skip
  fi;

fallback:
  /* 5. some apply did not reply OK: staging -> pending (this coordinator's own CAS), then the
   * classic protocol */
  att = 0;
  do
  :: atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (R(me).ex && (R(me).rev == myrev || mut == M_BLIND_PENDING)) ->
             R(me).st = S_PEND; R(me).done = 0; R(me).gen = mygen + 1; REC_STATE(me, S_PEND);
             R(me).rev++; LAND();
             if
             :: res == R_OK -> myrev = R(me).rev; mygen++
             :: else -> skip
             fi
          :: else -> res = R_CONF
          fi
       fi
     };
     if
     :: res == R_OK -> break
     :: else ->
        atomic { g_ex = R(me).ex; g_rev = R(me).rev; g_st = R(me).st; g_gen = R(me).gen;
                 g_done = R(me).done };
        if
        :: (g_ex && !g_done && g_st == S_PEND && g_gen == mygen + 1) ->
           myrev = g_rev; mygen++; break   /* ours, its reply lost */
        :: (g_ex && g_st == S_COMM) ->
           /* a resolver or a reader proved the commit */
           myrev = g_rev; settled = g_done; rep[me - 1] = REP_OK; goto finishing
        :: (g_ex && g_st == S_ABRT) -> goto fenced   /* a resolver fenced and aborted: kAborted */
        :: (g_ex && g_st == S_STAG && g_rev == myrev) ->
           att++;
           if
           :: att >= MAXATT -> goto fallback_failed
           :: else -> skip
           fi
        :: !g_ex -> rep[me - 1] = REP_UNK; goto finish   /* settled and purged meanwhile */
        fi
     fi
  od;
  first = 0;
  goto applies;

fallback_failed:
  /* the record stays staging, left to the resolvers: they commit it if every apply landed
   * (kUnknown, even when an apply conflicted and so the commit cannot be proved) */
  rep[me - 1] = REP_UNK;
  goto finish;

create_lost:
  /* the record create's outcome is unknown and it could not be fenced: it may still land, and
   * then a resolver proves the commit if every apply landed */
  rep[me - 1] = (mut == M_LOST_CREATE_UNAVAILABLE -> REP_FAIL : REP_UNK);
  goto finish;

fenced:
  /* someone fenced the record (or a resolver aborted it): aborted; reverse our landed holds.
   * No marker: the fence is one already (a resolver writes its own). */
  close_windows();
  d = ND;
  do
  :: d > 0 ->
     d--;
     if
     :: s_sent[d] -> reverse_one(d)
     :: else -> skip
     fi
  :: else -> break
  od;
  rep[me - 1] = REP_FAIL;
  goto finish;

flip_failed:
  /* the flip's outcome is unknown, or it certainly did not land */
  if
  :: maybe ->
     rep[me - 1] = (mut == M_UNKNOWN_AS_FAIL -> REP_FAIL : REP_UNK);
     goto finish
  :: else -> skip
  fi;

rollback:
  /* R1 MarkAborted */
  close_windows();
  do
  :: atomic {
       if
       :: CRASHOPT
       :: LOSTREQ
       :: true -> FSTEP;
          if
          :: (R(me).ex && R(me).rev == myrev) ->
             R(me).st = S_ABRT; R(me).by = BY_COORD; REC_STATE(me, S_ABRT); R(me).rev++; LAND();
             if
             :: res == R_OK -> myrev = R(me).rev
             :: else -> skip
             fi
          :: else -> res = R_CONF
          fi
       fi
     };
     if
     :: res == R_OK -> break
     :: else ->
        atomic { g_ex = R(me).ex; g_rev = R(me).rev; g_st = R(me).st; g_gen = R(me).gen;
                 g_done = R(me).done };
        if
        :: !g_ex -> settled = 1; break
        :: (g_ex && g_st == S_ABRT) -> myrev = g_rev; settled = g_done; break
        :: (g_ex && g_st == S_COMM) -> found_comm = 1; goto rolled_back
        :: (g_ex && g_st == S_PEND && g_rev != myrev && indoubt && g_gen == mygen + 1) ->
           myrev = g_rev; mygen++; indoubt = 0
        :: (g_ex && g_st == S_PEND && g_rev != myrev && !(indoubt && g_gen == mygen + 1)) ->
           goto rolled_back
        :: (g_ex && g_st == S_PEND && g_rev == myrev) -> skip
        fi
     fi
  od;
  /* R2 reverse every sent apply, in reverse action order */
  allf = 1;
  d = ND;
  do
  :: d > 0 ->
     d--;
     if
     :: s_sent[d] -> reverse_one(d)
     :: else -> skip
     fi
  :: else -> break
  od;
  /* R3 the outcome marker */
  if
  :: !settled -> mark_done(S_ABRT, 0)
  :: else -> skip
  fi;

rolled_back:
  if
  :: found_comm -> rep[me - 1] = REP_UNK
  :: else -> rep[me - 1] = REP_FAIL
  fi;

finish:
  close_windows();
  goto end;

dead:
  close_windows();
end:
  skip
}

/* ---- the collector (gc/collector.cpp RunOnce) ---- */

/* One RunOnce: every record, then the sweep (dangling holds, tombstone/placeholder purge). */
inline run_once() {
  h = 1;
  do
  :: h <= NT -> repair(h); h++
  :: else -> break
  od;
  sw_d = 0;
  do
  :: sw_d < ND ->
     atomic {
       c_ex = doc[sw_d].ex; c_tx = doc[sw_d].tx; c_rev = doc[sw_d].rev;
       c_stamped = doc[sw_d].stamped; c_dead = (doc[sw_d].gone || doc[sw_d].del);
       c_sw = doc[sw_d].sw; c_hx = doc[sw_d].hx
     };
     if
     :: (c_ex && c_tx != 0) ->
        atomic {
          h_ex = R(c_tx).ex; h_done = R(c_tx).done;
          if
          :: (!h_ex && c_hx) -> maybe_expire_hold(c_tx)
          :: else -> skip
          fi;
          h_dx = dexp[c_tx - 1]
        };
        /* as a contender does: a hold with a deadline whose record is absent is undone only
         * past its deadline, and only once the record is fenced */
        if
        :: (!h_ex && c_hx && (h_dx || mut == M_NO_DEADLINE) && mut != M_CONTENDER_NO_FENCE) ->
           fence_record(sw_d, c_tx);
           atomic { h_ex = R(c_tx).ex; h_done = R(c_tx).done }
        :: else -> skip
        fi;
        if
        :: (h_done || (!h_ex && (!c_hx || (mut == M_CONTENDER_NO_FENCE && h_dx)))) ->
           undo_dangling(sw_d, c_tx)
        :: else -> skip
        fi
     :: (c_ex && c_tx == 0 && c_stamped && c_dead && !final) ->
        if
        :: skip   /* tombstone_retention not yet passed */
        :: (c_sw == 0 || mut == M_PURGE_NO_AGE) ->   /* passed: no paused coordinator predates the stamp (§7) */
           atomic {
             if
             :: CRASHOPT
             :: LOSTREQ
             :: true -> FSTEP;
                if
                :: (doc[sw_d].ex && doc[sw_d].rev == c_rev) ->
                   doc[sw_d].ex = 0; doc[sw_d].stamped = 0; doc[sw_d].sw = 0;
                   doc[sw_d].gone = 0; doc[sw_d].del = 0; doc[sw_d].val = 0;
                   doc[sw_d].rev++; LAND()
                :: else -> res = R_CONF
                fi
             fi
           }
        fi
     :: else -> skip
     fi;
     sw_d++
  :: else -> break
  od
}

proctype Collector() {
  REPAIR_LOCALS;
  byte h, sw_d, runs, c_tx, c_rev, c_sw;
  bit c_ex, c_stamped, c_dead, h_ex, h_done, c_hx, h_dx;
  do
  :: runs < MAXRUNS -> run_once(); runs++
  :: else -> break
  od;
dead:
  skip
}

/* ---- the reader (engine/reads.cpp ReadDocument, read committed) ---- */

proctype Reader() {
  byte n, d, j, round, over, x_tx, x_val, x_uo, x_uk, x_uv, k, v, snap, start, first_a;
  bit x_ex, x_dlg, x_del, x_gone, have_a, got, all;
  bit r_ex, r_done; byte r_st, r_wk, r_wv, r_rev;
  do
  :: n < READS ->
     d = ((n % 2) == 0 -> DA : DB);
     round = 0; over = 0; got = 0;
     start = COMBITS;   /* committed before the read began: the read must show them */
     do
     :: round < 8 ->
        atomic {
          x_ex = doc[d].ex; x_tx = doc[d].tx; x_dlg = doc[d].dlg; x_del = doc[d].del;
          x_gone = doc[d].gone; x_val = doc[d].val; x_uo = doc[d].uo; x_uk = doc[d].uk;
          x_uv = doc[d].uv; snap = COMBITS
        };
        if
        :: !x_ex -> k = K_ABSENT; v = 0; got = 1; break
        :: (x_ex && x_tx == 0) ->   /* the committed image */
           k = (x_gone -> K_GONE : (x_del -> K_DEL : K_LIVE)); v = x_val; got = 1; break
        :: (x_ex && x_tx != 0 && x_tx == over) ->   /* a dangling hold: its undo data */
           k = x_uk; v = x_uv; got = 1; break
        :: (x_ex && x_tx != 0 && x_tx != over) ->
           atomic {
             r_ex = R(x_tx).ex; r_done = R(x_tx).done; r_st = R(x_tx).st; r_rev = R(x_tx).rev;
             r_wk = R(x_tx).wk[d]; r_wv = R(x_tx).wv[d]; snap = COMBITS
           };
           if
           :: (!r_ex || (r_done && r_st != S_COMM)) ->   /* gone, aborted, a fence: read the document again */
              over = x_tx; round++
           :: (r_ex && r_done && r_st == S_COMM) ->
              /* a committed marker: read the document again. Still held by x_tx: a dangling
               * hold (its undo data); otherwise the image of the first read was committed. */
              atomic {
                if
                :: (doc[d].ex && doc[d].tx == x_tx) -> k = doc[d].uk; v = doc[d].uv
                :: else -> k = (x_dlg -> K_DEL : K_LIVE); v = x_val
                fi;
                snap = COMBITS
              };
              got = 1; break
           :: (r_ex && !r_done && r_st == S_STAG) ->
              /* staging: is every listed document held by x_tx? */
              all = 1; j = 0;
              do
              :: j < ND ->
                 atomic {
                   if
                   :: !(doc[j].ex && doc[j].tx == x_tx) -> all = 0
                   :: else -> skip
                   fi;
                   snap = COMBITS
                 };
                 j++
              :: else -> break
              od;
              if
              :: (all && mut == M_READER_NO_CAS) -> got = 1
              :: (all && mut != M_READER_NO_CAS) ->
                 /* prove the commit: CAS staging@r_rev -> committed */
                 atomic {
                   if
                   :: (R(x_tx).ex && R(x_tx).rev == r_rev) ->
                      R(x_tx).st = S_COMM; REC_STATE(x_tx, S_COMM); R(x_tx).rev++; got = 1
                   :: else -> skip
                   fi;
                   snap = COMBITS
                 }
              :: (!all && mut == M_READER_NO_REREAD) -> got = 1
              :: (!all && mut != M_READER_NO_REREAD) ->
                 /* still staging at r_rev: not committed (no commit proof can have passed) */
                 atomic {
                   if
                   :: (R(x_tx).ex && R(x_tx).rev == r_rev) -> got = 1
                   :: else -> skip
                   fi;
                   snap = COMBITS
                 }
              fi;
              if
              :: (got && all) ->   /* the new image */
                 k = (x_dlg -> K_DEL : K_LIVE); v = x_val; break
              :: (got && !all) ->  /* the pre-image */
                 k = r_wk; v = r_wv; break
              :: else -> round++   /* the record moved: start over */
              fi
           :: (r_ex && !r_done && r_st == S_COMM) ->   /* the new image */
              k = (mut == M_READER_OLD -> r_wk : (x_dlg -> K_DEL : K_LIVE));
              v = (mut == M_READER_OLD -> r_wv : x_val);
              got = 1; break
           :: (r_ex && !r_done && (r_st == S_PEND || r_st == S_ABRT)) ->   /* the pre-image */
              k = (mut == M_READER_NEW -> (x_dlg -> K_DEL : K_LIVE) : r_wk);
              v = (mut == M_READER_NEW -> x_val : r_wv);
              got = 1; break
           fi
        fi
     :: else -> break   /* kept changing hands: kUnavailable */
     od;
     if
     :: got ->
        d_step {
          if
          /* Nothing of a transaction not committed by the end of the read (snap), everything
           * of one committed before it began (start), and no going back on an earlier read. */
          :: d == DA ->
             read_committed_ok = (k == K_LIVE && (v & (3 - snap)) == 0 &&
                                  (v & start) == start &&
                                  (!have_a || (first_a & v) == first_a))
          :: else ->
             read_committed_ok = ((k != K_LIVE || (v == 1 && (snap & 1))) &&
                                  (k != K_DEL || (snap & 2)) &&
                                  (!(start & 2) || k != K_LIVE) &&
                                  (!((start & 1) && !(snap & 2)) || (k == K_LIVE && v == 1)))
          fi;
          assert(!ON(P_READ) || read_committed_ok);
          if
          :: (d == DA && !have_a) -> have_a = 1; first_a = v
          :: else -> skip
          fi
        }
     :: else -> skip
     fi;
     n++
  :: else -> break
  od
}

/* ---- the checks at the end ---- */

init {
  REPAIR_LOCALS;
  byte h, sw_d, c_tx, c_rev, c_sw, t, bits;
  bit c_ex, c_stamped, c_dead, h_ex, h_done, blive, c_hx, h_dx;

  c_code {
    if (getenv("LITETX_MAXCRASH")) maxcrash = atoi(getenv("LITETX_MAXCRASH"));
    if (getenv("LITETX_MAXLOST")) maxlost = atoi(getenv("LITETX_MAXLOST"));
    if (getenv("LITETX_MAXEXP")) maxexp = atoi(getenv("LITETX_MAXEXP"));
    if (getenv("LITETX_MAXEXT")) maxext = atoi(getenv("LITETX_MAXEXT"));
    if (getenv("LITETX_MAXRUNS")) maxruns = atoi(getenv("LITETX_MAXRUNS"));
    if (getenv("LITETX_READS")) reads = atoi(getenv("LITETX_READS"));
    if (getenv("LITETX_MUT")) mut = atoi(getenv("LITETX_MUT"));
    if (getenv("LITETX_PROP")) prop = atoi(getenv("LITETX_PROP"));
    if (getenv("LITETX_PARALLEL")) parallel = atoi(getenv("LITETX_PARALLEL"));
  };
  atomic {
    doc[DA].ex = 1; doc[DA].rev = 1; doc[DA].val = 0;
    run Coord(1); run Coord(2); run Collector(); run Collector(); run Reader()
  };
  /* A record create lost on its way lands late (at any moment), or never. */
  do
  :: late[0] -> atomic { if :: !R(1).ex -> create_staging(1) :: else -> skip fi; late[0] = 0 }
  :: late[1] -> atomic { if :: !R(2).ex -> create_staging(2) :: else -> skip fi; late[1] = 0 }
  :: (_nr_pr == 1) -> break
  od;

  /* Crashes stop; lost creates never arrive; time passes (every lease and hold deadline runs
   * out); one healthy collector run. */
  atomic {
    final = 1;
    late[0] = 0; late[1] = 0; cpend[0] = 0; cpend[1] = 0;
    rec[0].exp = 1; rec[1].exp = 1; dexp[0] = 1; dexp[1] = 1
  };
  run_once();

  atomic {
    /* progress: every record settled (a marker or erased), no document held */
    progress_ok = ((!rec[0].ex || rec[0].done) && (!rec[1].ex || rec[1].done) &&
                   doc[DA].tx == 0 && doc[DB].tx == 0);
    assert(!ON(P_PROG) || progress_ok);

    bits = doc[DA].val;
    blive = (doc[DB].ex && !doc[DB].gone && !doc[DB].del && !doc[DB].dlg);

    /* a committed transaction is never reversed, and its caller is never told otherwise */
    committed_kept_ok = ((!COM(1) || (bits & 1)) && (!COM(2) || (bits & 2)));
    assert(!ON(P_FINAL) || committed_kept_ok);
    outcome_ok = (rep[0] != REP_OK || COM(1)) && (rep[0] != REP_FAIL || !COM(1)) &&
                 (rep[1] != REP_OK || COM(2)) && (rep[1] != REP_FAIL || !COM(2)) &&
                 (!rec[0].ex || rec[0].st == (COM(1) -> S_COMM : S_ABRT)) &&
                 (!rec[1].ex || rec[1].st == (COM(2) -> S_COMM : S_ABRT));
    assert(!ON(P_FINAL) || outcome_ok);

    /* no lost update: the counter is the sum of the committed adjusts */
    lost_update_ok = (bits == COMBITS);
    assert(!ON(P_LOST) || lost_update_ok);

    /* atomicity: nothing of an uncommitted transaction; each transaction's two writes agree */
    atomicity_ok = ((bits & (3 - COMBITS)) == 0) &&
                   ((blive && doc[DB].val == 1) == ((bits & 1) && !(bits & 2))) &&
                   (!blive || doc[DB].val == 1);
    assert(!ON(P_ATOM) || atomicity_ok)
  };
  goto over;
dead:
  assert(false);   /* no crash in the final run */
over:
  skip
}
