/*
 * lifecycle.pml: the distributed run protocol of Cronos, checked by spin.
 * States and events are those of cronos/lifecycle.py (RunState, Event); each transition is one
 * inline ev_<event>, one atomic step guarded by its from-state (and the epoch or the owner).
 *
 * Modelled: PostgreSQL (the runs table, the job's tick cursor, the epoch row; every statement is
 * one atomic step), Redis (the stream of tokens, the tick locks, the leader lock), two leader
 * candidates, two executors, the API and the environment. One job with the `forbid` policy, two
 * ticks (0 and 1) and attempts 1..2 (max_retries = 1); run slot R = 2*tick + attempt - 1; slot X
 * is a manual run of the job (triggered) or a run of a child job (chained), at most one of them.
 *
 * Abstracted: time (leases, lock ttls, "a while", due times and graces are nondeterministic steps);
 * tokens (the stream holds, per run, whether some unacked entry exists: any executor may read it
 * at any time, which over-approximates XAUTOCLAIM; an ack removes it, possibly with a later copy,
 * which over-approximates losses); a transaction's follow-up statements (the wake after a finish
 * or a reap) are a separate, later atomic step; the overlap decision's clock (WAIT or SKIP is
 * nondeterministic); an executor reads a token and takes its tick lock in one step, and acks it in
 * the step of its claim's or wake's commit. A claim locks nothing: its facts (an end not committed
 * yet still runs), the wait it records, and its look again are three steps. The run in slot X has no retry. Faults (Redis losing
 * its data, one leader and one executor pausing or dying, a clean stop, possibly with Redis losing
 * its data too, a spurious watchdog, an expiry, a hand-over, a replace, the extra run, a cancel by the
 * API: of a pending run at once, of a running one a request its executor's finish honours) each happen
 * at most once, at most MAXF of them (-DMAXF=n, -DOFF=mask: faults disabled) per execution. A paused
 * process may wake up; one that does not is dead: its leader lock, tick lock and lease expire.
 * The misfire scenario (run_once): a leader stops, Redis loses its data (with the stop or after),
 * the next leader takes over beyond the grace: every tick not started is late. It assumes no token
 * of a tick is in flight then (-DSTALE_IN_FLIGHT drops that: then a claim of a stale tick that
 * the late leader did not write or push again, due now, expires it; -DBUG_CLAIM_NO_EXPIRY: not).
 *
 * Properties: G1 (a run starts at most once), G3 (never two runs of the job reserved or running, and
 * a reserved run starts only while it is still its executor's: not taken back, released or ended), G5 (only
 * the current epoch's fenced writes are accepted), misfire (under run_once at most one stale tick
 * runs) as assertions on the steps that could break them; no lost tick (every tick written, no
 * run left queued, waiting or running) when nothing can move any more (timeout, in init).
 * An executor claims a run at its due instant, or reserves it ahead (when nothing of its job is
 * reserved or running) and at the instant starts it with one statement guarded by its state and
 * owner (if its lease and grace still hold): the API may take a reserved run back (a change of its
 * job: queued again, then maybe handed over; a cancel ends it), the reaper releases one whose lease
 * ran out (back in the outbox); either way the executor's start finds it so and claims it as queued.
 * Builds: -DBUG_DOUBLE_RUN (outbox before catch-up), -DBUG_UNFENCED (no epoch check),
 * -DBUG_START_UNCHECKED (a reserved run started at its instant without asking whether it still is),
 * -DBUG_WAKE_SAME_SNAPSHOT (the finisher reads its waiters before its finish), -DBUG_NO_RECHECK
 * (a claim that recorded a wait does not look again whether anything still runs), -DBUG_REAP_NO_WAKE
 * (a reaped run wakes nobody), -DNO_SWEEP (no stranded-waiter sweep), -DSTALE_IN_FLIGHT (a token
 * may be in flight at a late takeover), -DCOVERAGE (pan prints each event its search takes).
 * tests/model/test_protocol_model.py runs them; `spin -DMAXF=2 -a` (any two faults) verifies too,
 * ~121M states, ~10 min, 13 GB.
 */

#ifndef MAXF
#define MAXF 2
#endif
#define NT 2          /* ticks */
#define NR 5          /* run slots */
#define X 4           /* the manual or chained run */
#define NONE 255
#define NEW 0         /* a slot not written yet */

/* candidates' phases */
#define CAND 0
#define ELECT 1
#define UNPUSH 2
#define LEAD 3
#define PUSH 4
#define RWAKE 5
/* executors' phases */
#define IDLE 0
#define CLAIM 2
#define RUN 3
#define FIN 4
#define WAKE 5
#define WAITREC 6     /* decided to wait: RUNS_WAIT is its next statement */
#define RECHECK 7     /* recorded waiting: it looks again (waiters.wake_free) */
#define RESV 8        /* reserved its run ahead of the due instant: starts it then (RUNS_START) */

mtype = { reserved, cancelled, queued, waiting, running, completed, failed, skipped };  /* new ones first: the others keep their numbers */

/* PostgreSQL */
mtype st[NR];       /* run state; NEW: not written */
byte pushed[NR];    /* queued: the epoch that pushed its token, 0 = in the outbox */
byte owner[NR];     /* reserved or running: the executor that claimed it */
bool lease[NR];     /* reserved or running: its lease is valid (time: its executor knows it without asking) */
bool creq[NR];      /* reserved or running: a cancel was requested (run_cancels), its executor stops it */
byte cursor;        /* ticks written */
byte epoch;
byte xjob;          /* job of slot X: 1 manual run of the job, 2 a child job's run */
/* Redis */
bool tok[NR];       /* an unacked stream entry of the run */
byte tlock[NR];     /* tick lock holder */
byte llock;         /* leader lock holder */
bool rlost;         /* Redis lost its data, no leader reacted yet */
/* processes: 1, 2 candidates; 3, 4 executors */
byte ph[5];
byte hand[5];       /* the run a process works on */
byte my[3];         /* a candidate's epoch, 0 = not leading */
bool paused[5];
bool seen[5];       /* BUG_WAKE_SAME_SNAPSHOT: "someone waits", read before the finish */
/* environment and ghosts */
byte asleep;        /* the paused process that will wake up (a paused one that will not is dead) */
byte faults;
bit f_redis, f_lpause, f_epause, f_stop, f_spur, f_expire, f_hand, f_extra, f_repl, f_cancel;
bool stopped;        /* a leader stopped and nobody was elected since */
bool lost_after_stop; /* ... and then Redis lost its data */
bool late;
byte stale;         /* ticks (bits) late beyond their grace when a late leader took over */
byte fresh;         /* stale ticks (bits) the late leader wrote or pushed again: due now, within their grace */
byte stale_ran;     /* stale ticks (bits) started */
byte began;         /* runs (bits) started */
hidden byte i, r, o, j;   /* scratch, within one atomic step */

#define TK(s) ((s) / 2)
#define AT1(s) ((s) < X && (s) % 2 == 0)
#define JOB(s) ((s) < X -> 1 : xjob)
/* a process pauses (asleep: it will wake up) or dies, but not inside a transaction: the end of a run
   and its wake are one transaction (the wake a later statement of it), committed or rolled back whole */
#define CAN_PAUSE(p) (!paused[p] && !(p <= 2 && ph[p] == RWAKE) && !(p > 2 && ph[p] == WAKE))
#define PAUSE(a, b) if :: CAN_PAUSE(a) -> paused[a] = true; asleep = a :: CAN_PAUSE(b) -> paused[b] = true; asleep = b \
                       :: CAN_PAUSE(a) -> paused[a] = true :: CAN_PAUSE(b) -> paused[b] = true fi
#define AT(p, x) (!paused[p] && ph[p] == (x))
#define FAULT(f) (!(f) && faults < MAXF && (OFF & F_##f) == 0)
#ifndef OFF
#define OFF 0
#endif
#define F_f_redis 1
#define F_f_lpause 2
#define F_f_epause 4
#define F_f_stop 8
#define F_f_spur 16
#define F_f_expire 32
#define F_f_hand 64
#define F_f_extra 128
#define F_f_repl 256
#define F_f_cancel 512
#define ANY(c) (c(0) || c(1) || c(2) || c(3) || c(4))
#define PICK(c, v) if :: c(0) -> v = 0 :: c(1) -> v = 1 :: c(2) -> v = 2 :: c(3) -> v = 3 :: c(4) -> v = 4 fi
#define FIRST(c, v) v = NONE; for (i : 0 .. NR - 1) { if :: v == NONE && c(i) -> v = i :: else fi }; i = 0
#define OWNED(s) (st[s] == reserved || st[s] == running)   /* lifecycle.OWNED: G3 counts both */
#define RUNJ(s) (OWNED(s) && JOB(s) == j)
#define NRUN (RUNJ(0) + RUNJ(1) + RUNJ(2) + RUNJ(3) + RUNJ(4))   /* reserved or running runs of job j */
#define C_TOKEN(s) (tok[s])
#define C_QUEUED(s) (st[s] == queued)
#define C_PENDING(s) (st[s] == queued || st[s] == waiting)
#define C_RUNNING(s) (st[s] == running)
#define C_RESERVED(s) (st[s] == reserved)
#define C_OUTBOX(s) (st[s] == queued && pushed[s] == 0)
#define C_PUSHED(s) (st[s] == queued && pushed[s] != 0)
#define HELD(s) (AT(3, CLAIM) && hand[3] == s || AT(4, CLAIM) && hand[4] == s)
#define C_STUCK(s) (C_PUSHED(s) && !tok[s] && !HELD(s))  /* no executor claimed it "for a while" */
#define C_PAUSED_LOCK(s) (tlock[s] != 0 && paused[tlock[s]])
#define C_PAUSED_LEASE(s) (OWNED(s) && lease[s] && paused[owner[s]])
#define C_REAP(s) (OWNED(s) && !lease[s])
#define C_WAITJ(s) (st[s] == waiting && JOB(s) == j)
/* an end of a run of job jj not committed yet (its wake, a later statement, to come): a claim's
   facts still see that run running, and RUNNING_JOBS_LOCKED waits for the commit */
#define ENDING(p, jj) (ph[p] == ((p) <= 2 -> RWAKE : WAKE) && JOB(hand[p]) == (jj))
#define FINISHING(jj) (ENDING(1, jj) || ENDING(2, jj) || ENDING(3, jj) || ENDING(4, jj))
#define C_STRANDED(s) (st[s] == waiting && (!OWNED(0) || JOB(0) != JOB(s)) && (!OWNED(1) || JOB(1) != JOB(s)) && (!OWNED(2) || JOB(2) != JOB(s)) && (!OWNED(3) || JOB(3) != JOB(s)) && (!OWNED(4) || JOB(4) != JOB(s)))
#define C_OLDER_RUNNING(s) (st[s] == running && JOB(s) == j && s < r)   /* the fault replaces a running run only */
#define STALE(s) (late && AT1(s) && (stale >> TK(s)) & 1)
#ifdef BUG_CLAIM_NO_EXPIRY
#define EXPIRES(s) false
#else
/* lifecycle.expired at the claim: the expiry stamped on the run when written (runs.expires_at) has
   passed; a stale tick written or pushed again due now carries a new one (lifecycle.due_anew) */
#define EXPIRES(s) (STALE(s) && !((fresh >> TK(s)) & 1))
#endif
/* at the late takeover no token of a tick is left anywhere (stream, an executor, a leader's push) */
#ifdef STALE_IN_FLIGHT
#define NO_STALE_IN_FLIGHT true
#else
#define IN_HAND(s) (ph[3] == CLAIM && hand[3] == s || ph[4] == CLAIM && hand[4] == s)   /* paused or not */
#define NO_STALE_IN_FLIGHT (!ANY(C_TOKEN) && !IN_HAND(0) && !IN_HAND(2) && ph[1] != PUSH && ph[2] != PUSH)
#endif
#define STARTABLE(s) (lease[s] && !EXPIRES(s))   /* lifecycle.startable */
#ifdef BUG_START_UNCHECKED
#define STILL_MINE(s) true                       /* started without asking (the old design) */
#else
#define STILL_MINE(s) (st[s] == reserved && owner[s] == me)   /* RUNS_START's guard */
#endif
#ifdef BUG_UNFENCED
#define FENCE true
#else
#define FENCE (my[me] == epoch)
#endif
#define G5 assert(my[me] == epoch)   /* a fenced write is accepted from the current epoch only */
#ifdef BUG_DOUBLE_RUN
#define CATCHUP_DONE true            /* the old order: the outbox's stale rule before the catch-up */
#else
#define CATCHUP_DONE (!late || cursor == NT)   /* due ticks are written before the outbox runs */
#endif

/* ---- the transitions (cronos.lifecycle.TRANSITIONS), one inline per event ---- */
#ifdef COVERAGE   /* pan prints each event the first time its search takes it */
c_decl { static char taken_at[1000]; }
#define TAKEN(e) ; c_code { if (!taken_at[__LINE__]) { taken_at[__LINE__] = 1; printf("taken: %s\n", #e); } }
#else
#define TAKEN(e)
#endif
inline ev_written(p)   { assert(st[2 * cursor] == NEW); st[2 * cursor] = queued; pushed[2 * cursor] = p; cursor++ TAKEN(written) }
inline ev_triggered()  { assert(st[X] == NEW); st[X] = queued; pushed[X] = 0; xjob = 1 TAKEN(triggered) }
inline ev_chained()    { assert(st[X] == NEW); st[X] = queued; pushed[X] = 0; xjob = 2 TAKEN(chained) }
inline ev_retried(s)   { assert(st[s + 1] == NEW); st[s + 1] = queued; pushed[s + 1] = 0 TAKEN(retried) }
inline ev_pushed(s)    { assert(st[s] == queued); pushed[s] = my[me] TAKEN(pushed) }
inline ev_unpushed(s)  { assert(st[s] == queued); pushed[s] = 0 TAKEN(unpushed) }
/* the run's work starts: at its claim, or at its due instant when it was reserved */
inline begins(s) {
  assert(!((began >> s) & 1)); began = began | (1 << s);             /* G1 */
  if :: STALE(s) -> stale_ran = stale_ran | (1 << TK(s)) :: else fi;
  assert(stale_ran != 3)                                              /* misfire: run_once */
}
inline ev_claimed(s)   {
  assert(st[s] == queued); st[s] = running; pushed[s] = 0; owner[s] = me; lease[s] = true;
  j = JOB(s); assert(NRUN <= 1); j = 0;                               /* G3 */
  begins(s) TAKEN(claimed)
}
inline ev_reserved(s)  {
  assert(st[s] == queued); st[s] = reserved; pushed[s] = 0; owner[s] = me; lease[s] = true;
  j = JOB(s); assert(NRUN <= 1); j = 0 TAKEN(reserved)                /* G3 */
}
inline ev_started(s)   { assert(st[s] == reserved && owner[s] == me); st[s] = running; begins(s) TAKEN(started) }
inline ev_unreserved(s) { assert(st[s] == reserved && owner[s] == me); st[s] = queued; pushed[s] = epoch; owner[s] = 0; lease[s] = false TAKEN(unreserved) }
/* the API's change of the job: queued again, its token still out (the lease's time not over: its executor
   may find it startable, lifecycle.startable, and its start must ask) */
inline ev_taken_back(s) { assert(st[s] == reserved); st[s] = queued; pushed[s] = epoch; owner[s] = 0 TAKEN(taken_back) }
/* the reaper: its lease ran out before it started, back in the outbox */
inline ev_released(s)  { assert(st[s] == reserved); st[s] = queued; pushed[s] = 0; owner[s] = 0; lease[s] = false TAKEN(released) }
inline ev_waited(s)    { assert(st[s] == queued); st[s] = waiting; pushed[s] = 0 TAKEN(waited) }
inline ev_woken(s)     { assert(st[s] == waiting); st[s] = queued; pushed[s] = 0 TAKEN(woken) }
inline ev_overlapped(s) { assert(st[s] == queued || st[s] == waiting); st[s] = skipped; pushed[s] = 0 TAKEN(overlapped) }
inline ev_misfired(s)  { assert(st[s] == queued); st[s] = skipped; pushed[s] = 0 TAKEN(misfired) }
inline ev_expired(s)   { assert(st[s] == queued || st[s] == waiting); st[s] = skipped; pushed[s] = 0 TAKEN(expired) }
inline ev_handed_over(s) { assert(st[s] == queued); st[s] = skipped; pushed[s] = 0 TAKEN(handed_over) }
inline ev_completed(s) { assert(st[s] == running); st[s] = completed; owner[s] = 0; lease[s] = false TAKEN(completed) }
inline ev_failed(s)    { assert(st[s] == running); st[s] = failed; owner[s] = 0; lease[s] = false TAKEN(failed) }
inline ev_lost(s)      { assert(st[s] == running); st[s] = failed; owner[s] = 0; lease[s] = false TAKEN(lost) }
inline ev_replaced(s)  { assert(st[s] == reserved || st[s] == running); st[s] = failed; owner[s] = 0; lease[s] = false TAKEN(replaced) }
inline ev_cancelled(s) { assert(st[s] == queued || st[s] == waiting || st[s] == reserved); st[s] = cancelled; pushed[s] = 0; owner[s] = 0 TAKEN(cancelled) }
inline ev_cancel_requested(s) { assert(st[s] == running); creq[s] = true TAKEN(cancel_requested) }
inline ev_stopped(s)   { assert(st[s] == running); st[s] = cancelled; owner[s] = 0; lease[s] = false TAKEN(stopped) }

inline retry_of(s) { if :: AT1(s) -> ev_retried(s) :: else fi }   /* in the failure's step */
inline unpush_all() { for (i : 0 .. NR - 1) { if :: st[i] == queued -> ev_unpushed(i) :: else fi }; i = 0; rlost = false }
/* the follow-up of an end: if nothing of job j runs, its earliest waiting run is woken */
inline wake_behind(jj) { j = jj; if :: NRUN == 0 -> FIRST(C_WAITJ, o); if :: o != NONE -> ev_woken(o) :: else fi :: else fi; j = 0; o = 0 }
/* an executor acks its token and releases its tick lock (compare-and-delete); done with it */
inline ack(s) { tok[s] = false; if :: tlock[s] == me -> tlock[s] = 0 :: else fi; hand[me] = 0; ph[me] = IDLE }
inline redis_lost() {   /* Redis loses all its data: the stream, the tick locks, the leader lock */
  f_redis = 1; rlost = true; llock = 0;
  for (i : 0 .. NR - 1) { tok[i] = false; tlock[i] = 0 }; i = 0;
  if :: stopped -> lost_after_stop = true :: else fi
}
inline step_down() { my[me] = 0; if :: llock == me -> llock = 0 :: else fi; hand[me] = 0; ph[me] = CAND }

/* A leader candidate: campaigns for the lock; leading, it interleaves the leader's duties. */
proctype candidate(byte me) {
end: do
  :: atomic { AT(me, CAND) && llock == 0 && (me == 1 || epoch > 0 || ph[1] != CAND || paused[1]) ->  /* SET NX won (1 first: symmetry) */
       llock = me; ph[me] = ELECT }
  :: atomic { AT(me, ELECT) -> epoch++; my[me] = epoch; ph[me] = UNPUSH;        /* epoch += 1 */
       /* the misfire scenario: Redis lost its data after the old leader stopped, and this leader
          takes over beyond the grace: every tick not started yet is late (policy run_once) */
       if
       :: lost_after_stop && !late && NO_STALE_IN_FLIGHT ->
          late = true;
          for (i : 0 .. NT - 1) { if :: C_PENDING(2 * i) || st[2 * i] == NEW -> stale = stale | (1 << i) :: else fi }; i = 0
       :: true
       fi; lost_after_stop = false; stopped = false }
  :: atomic { AT(me, UNPUSH) ->                                                 /* election */
       if :: FENCE -> G5; unpush_all(); ph[me] = LEAD :: else -> step_down() fi }
  :: atomic { AT(me, LEAD) && cursor < NT ->                                    /* write tick(s) */
       if
       :: FENCE -> G5;
          do   /* catch-up under run_once: of the late ticks only the newest runs */
          :: late && cursor < NT - 1 -> r = 2 * cursor; ev_written(0); ev_misfired(r)
          :: else -> break
          od;
          if :: late -> fresh = fresh | (1 << cursor) :: else fi;   /* a late run is due when written */
          hand[me] = 2 * cursor; ev_written(my[me]); ph[me] = PUSH; r = 0
       :: else -> step_down()
       fi }
  :: atomic { AT(me, PUSH) -> tok[hand[me]] = true; hand[me] = 0; ph[me] = LEAD }  /* XADD */
  :: atomic { AT(me, LEAD) && ANY(C_OUTBOX) && CATCHUP_DONE ->                 /* outbox */
       if
       :: FENCE -> G5; FIRST(C_OUTBOX, r);
          if  /* stale_tick_runs(run_once, newest_written=tick == cursor) */
          :: STALE(r) && TK(r) != cursor - 1 -> ev_misfired(r)
          :: else -> if :: STALE(r) -> fresh = fresh | (1 << TK(r)) :: else fi;   /* kept: due now */
                     ev_pushed(r); hand[me] = r; ph[me] = PUSH
          fi; r = 0
       :: else -> step_down()
       fi }
  :: atomic { AT(me, LEAD) && (ANY(C_STUCK) || FAULT(f_spur) && ANY(C_PUSHED)) ->  /* watchdog */
       if
       :: FENCE -> G5;
          if
          :: ANY(C_STUCK) -> FIRST(C_STUCK, r)
          :: FAULT(f_spur) && ANY(C_PUSHED) -> f_spur = 1; faults++; FIRST(C_PUSHED, r)
          fi; ev_unpushed(r); r = 0
       :: else -> step_down()
       fi }
  :: atomic { AT(me, LEAD) && rlost ->                                          /* Redis lost its data */
       if :: FENCE -> G5; unpush_all() :: else -> step_down() fi }
  :: atomic { AT(me, LEAD) && ANY(C_REAP) ->                                    /* reaper */
       if
       :: FENCE -> G5; FIRST(C_REAP, r);
          if
          :: st[r] == reserved -> ev_released(r)                 /* never started: no end, nothing to wake */
          :: else -> if :: creq[r] -> ev_stopped(r) :: else -> ev_lost(r); retry_of(r) fi;   /* lifecycle.lost */
                     hand[me] = r; ph[me] = RWAKE
          fi; r = 0
       :: else -> step_down()
       fi }
#ifndef BUG_REAP_NO_WAKE
  :: atomic { AT(me, RWAKE) -> wake_behind(JOB(hand[me])); hand[me] = 0; ph[me] = LEAD }  /* its wake */
#else
  :: atomic { AT(me, RWAKE) -> hand[me] = 0; ph[me] = LEAD }
#endif
  :: atomic { AT(me, LEAD) && FAULT(f_expire) && ANY(C_PENDING) ->              /* expiry */
       if :: FENCE -> G5; f_expire = 1; faults++; PICK(C_PENDING, r); ev_expired(r); r = 0
       :: else -> step_down()
       fi }
#ifndef NO_SWEEP
  :: atomic { AT(me, LEAD) && ANY(C_STRANDED) ->                                /* stranded waiter */
       FIRST(C_STRANDED, r); ev_woken(r); r = 0 }
#endif
  :: atomic { AT(me, LEAD) && FAULT(f_stop) ->     /* clean stop (everything pushed), restart */
       f_stop = 1; faults++; stopped = true; step_down();
       if :: !f_redis && (OFF & F_f_redis) == 0 -> redis_lost() :: true fi }   /* an outage: Redis too */
  :: atomic { AT(me, LEAD) && llock != me -> step_down() }                      /* lock lost */
  od
}

/* An executor: for each token read, the tick lock, the claim, the run, the finish, the wake, the ack. */
proctype executor(byte me) {
end: do
  :: atomic { AT(me, IDLE) && ANY(C_TOKEN) ->       /* read a token (XREADGROUP / XAUTOCLAIM) */
       PICK(C_TOKEN, r);                                                         /* 1. tick lock */
       if :: tlock[r] == 0 -> tlock[r] = me; hand[me] = r; ph[me] = CLAIM
          :: else -> tok[r] = false                                              /* denied: ack */
       fi; r = 0 }
  :: atomic { AT(me, CLAIM) -> r = hand[me]; j = JOB(r);                       /* 2. claim: overlap() */
       if
       :: st[r] != queued -> ack(r)                                             /* not_queued */
       :: st[r] == queued && EXPIRES(r) -> ev_expired(r); ack(r)              /* past its grace */
       :: st[r] == queued && !EXPIRES(r) && (NRUN > 0 || FINISHING(j)) ->       /* forbid */
          if
          :: ph[me] = WAITREC            /* wait: recorded by the next statement (nothing locked) */
          :: ev_overlapped(r); ack(r)
          :: FAULT(f_repl) && ANY(C_OLDER_RUNNING) ->          /* the policy is now `replace` */
             f_repl = 1; faults++; FIRST(C_OLDER_RUNNING, o); ev_replaced(o); ev_claimed(r); ph[me] = RUN; o = 0
          fi
       :: st[r] == queued && !EXPIRES(r) && NRUN == 0 && !FINISHING(j) -> ev_claimed(r); ph[me] = RUN
       :: st[r] == queued && !EXPIRES(r) && NRUN == 0 && !FINISHING(j) -> ev_reserved(r); ph[me] = RESV  /* ahead */
       fi; r = 0; j = 0 }
  /* the due instant of a reserved run: started (RUNS_START, guarded by its state and owner) while its
     lease and grace hold (lifecycle.startable); otherwise given back if still its own. One taken back
     (queued again, or ended), released or given back is then claimed as a queued run (or dropped) */
  :: atomic { AT(me, RESV) -> r = hand[me];
       if
       :: STARTABLE(r) && STILL_MINE(r) -> ev_started(r); ph[me] = RUN
       :: STARTABLE(r) && !STILL_MINE(r) -> ph[me] = CLAIM
       :: !STARTABLE(r) -> if :: st[r] == reserved && owner[r] == me -> ev_unreserved(r) :: else fi; ph[me] = CLAIM
       fi; r = 0 }
  :: atomic { AT(me, WAITREC) -> r = hand[me];                                   /* RUNS_WAIT */
       if :: st[r] == queued -> ev_waited(r) :: else fi; ph[me] = RECHECK; r = 0 }   /* still queued only */
  :: atomic { AT(me, RECHECK) && !FINISHING(JOB(hand[me])) ->   /* look again, after such an end commits */
#ifndef BUG_NO_RECHECK
       wake_behind(JOB(hand[me]));
#endif
       ack(hand[me]) }                                                          /* no token, no lock */
  :: atomic { AT(me, RUN) && owner[hand[me]] == me && OWNED(hand[me]) && !lease[hand[me]] ->
       lease[hand[me]] = true }                                                 /* 3. heartbeat */
#ifdef BUG_WAKE_SAME_SNAPSHOT
  :: atomic { AT(me, RUN) -> j = JOB(hand[me]); seen[me] = ANY(C_WAITJ); j = 0; ph[me] = FIN }
#define FINISH FIN
#else
#define FINISH RUN
#endif
  :: atomic { AT(me, FINISH) -> r = hand[me];                                   /* 4. finish */
       if
       :: owner[r] == me && st[r] == running ->
          if
          :: ev_completed(r);
             if :: FAULT(f_extra) && st[X] == NEW && r < X -> f_extra = 1; faults++; ev_chained() :: true fi
          :: ev_failed(r); retry_of(r)
          :: creq[r] -> ev_stopped(r)                     /* cancelled: never retried */
          fi; ph[me] = WAKE
       :: else -> ack(r)                                  /* no longer its run: reports nothing */
       fi; r = 0 }
  :: atomic { AT(me, WAKE) ->                                    /* 5. wake: a later statement */
#ifdef BUG_WAKE_SAME_SNAPSHOT
       if :: seen[me] -> wake_behind(JOB(hand[me])) :: else fi; seen[me] = false;
#else
       wake_behind(JOB(hand[me]));
#endif
       ack(hand[me]) }                                                          /* 6. ack, unlock */
  od
}

/* The environment and the API: faults, time passing for the paused, the API's runs. */
proctype environment() {
end: do
  :: atomic { FAULT(f_redis) -> faults++; redis_lost() }
  :: atomic { FAULT(f_lpause) && (CAN_PAUSE(1) || CAN_PAUSE(2)) -> f_lpause = 1; faults++; PAUSE(1, 2) }  /* a leader pauses or dies */
  :: atomic { FAULT(f_epause) && (CAN_PAUSE(3) || CAN_PAUSE(4)) -> f_epause = 1; faults++; PAUSE(3, 4) }  /* an executor pauses or dies */
  :: atomic { asleep != 0 -> paused[asleep] = false; asleep = 0 }               /* wakes up */
  :: atomic { llock != 0 && paused[llock] -> llock = 0 }                        /* lock ttl */
  :: atomic { ANY(C_PAUSED_LOCK) || ANY(C_PAUSED_LEASE) ->       /* a paused executor's tick lock and lease */
       for (i : 0 .. NR - 1) { if :: C_PAUSED_LOCK(i) -> tlock[i] = 0 :: else fi; if :: C_PAUSED_LEASE(i) -> lease[i] = false :: else fi }; i = 0 }
  :: atomic { FAULT(f_extra) && st[X] == NEW -> f_extra = 1; faults++; ev_triggered() }  /* API */
  :: atomic { FAULT(f_hand) && ANY(C_QUEUED) -> f_hand = 1; faults++; PICK(C_QUEUED, r); ev_handed_over(r); r = 0 }
  :: atomic { FAULT(f_hand) && ANY(C_RESERVED) -> f_hand = 1; faults++; PICK(C_RESERVED, r);   /* API: the job changed */
       ev_taken_back(r); if :: ev_handed_over(r) :: true fi; r = 0 }      /* a pause: handed over; an edit: kept */
  :: atomic { FAULT(f_cancel) && ANY(C_PENDING) -> f_cancel = 1; faults++; PICK(C_PENDING, r); ev_cancelled(r); r = 0 }  /* API */
  :: atomic { FAULT(f_cancel) && ANY(C_RUNNING) -> f_cancel = 1; faults++; PICK(C_RUNNING, r); ev_cancel_requested(r); r = 0 }
  :: atomic { FAULT(f_cancel) && ANY(C_RESERVED) -> f_cancel = 1; faults++; PICK(C_RESERVED, r); ev_cancelled(r);
       wake_behind(JOB(r)); r = 0 }  /* not started: at once; then its job's first waiter woken (CancelStore._wake_behind) */
  od
}

init {
  atomic { run environment(); run candidate(1); run candidate(2); run executor(3); run executor(4) }
  atomic { timeout ->                       /* quiescent: nothing can move any more: no lost tick */
    assert(cursor == NT);                                      /* every tick was written */
    for (i : 0 .. NR - 1) { assert(st[i] != queued && st[i] != waiting && st[i] != reserved && st[i] != running) };
    assert((paused[3] || ph[3] == IDLE) && (paused[4] || ph[4] == IDLE)); i = 0 }
}
