#!/usr/bin/python3
"""tests/lifecycles/realfuzz.py: the lifecycle fuzzer with real processes (issue 25), run by
tests/cli/t0213-lifecycle-fuzz-real.bats.

The synthetic fuzzer (tests/unit/test_lifecycle_fuzz.c) plays random process trees through a
model of Linux; this one makes the same kind of tree out of real processes, so that what the
kernel really does (fork, setsid, setpgid, the double fork, reparenting, zombies, descriptors
kept or closed in children, close-on-exec) is what vramguard reads from /proc.

  realfuzz.py build --dir D --dev DEVDIR --lib LIBCUDA --seed S --trees N [--case TEXT]
      makes N random trees (seeds S*1000+0..N-1; --case: that one tree), each its own session
      under a launcher, and leaves them sleeping. Writes D/procs.lines (the fake driver's proc
      lines: a context is charged to the PID that opened it while any live process holds one of
      its descriptors), D/labels.json, and "fuzz PID START" lines to --record (lib.bash's pid
      file, for vg_cleanup).
  realfuzz.py check --dir D --doctor F --plan F
      reads vramguard's `--json doctor` and `--json clean` output and checks the properties
      against the labels; prints a reproducer for each failing tree. Exit 1 when P1 fails (or
      P3, outside the model's known limits), 0 otherwise.

A tree is a list of events, the synthetic fuzzer's words (its reproducer text):
  shell 2; fork 2 3 exec pgrp; ctx 3 0; fork 3 4; exit 3; ...
"shell P" is the launcher (a shell-like process in a session of its own, no terminal, reaping
its children at once); "fork P C [exec] [pgrp] [setsid] [nohup]"; "daemon P B C [exec]" (P forks
B, B setsid()s and forks C, B exits and P reaps it; with exec, C execs); "ctx P G" (P opens
DEVDIR/nvidiactl, nvidia-uvm and nvidiaG and maps the stand-in libcuda: CUDA's descriptors are
close-on-exec); "hup P" (ignore SIGHUP); "close P" (close the device descriptors it inherited);
"exit P" (SIGKILL); "reap P" (its parent waits for the zombie P). No busy events: every process
sleeps (blocked reading its control FIFO).

Labels, by construction as in the synthetic fuzzer: a process the launcher forks is a job root,
and so is one forked with setsid, and a daemon; every other process belongs to its parent's job.
A root is gone when it is dead or a zombie (read from /proc at check time).

Every process calls alarm(LIFETIME) (120 s) after fork and exec, carries VG_HELPER_TAG (the
environment vg_cleanup looks for) and is recorded with its start time.
"""

import mmap
import os
import select
import signal
import sys
import time

PY = "/usr/bin/python3"
LIFETIME = 120
ACK_TIMEOUT = 20.0
MAXPROC = 16  # processes per tree (launcher included), so a batch stays small on 2 cores

# ------------------------------------------------------------------------ the processes

MAPS = []  # keeps the libcuda mappings
OWNED = {}  # owner id -> [fds]: the device descriptors this process holds, by context owner


def setup_child(alarm=True):
    if alarm:
        signal.alarm(LIFETIME)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def ack(ack_fd, tree, pid_id, what="ok"):
    os.write(ack_fd, ("%d %d %d %s\n" % (tree, pid_id, os.getpid(), what)).encode())


def serve(d, tree, me, ack_fd, dev, lib, launcher=False):
    """The life of one process of a tree: read commands from its FIFO, do them."""
    ctl = os.open(os.path.join(d, "ctl.%d.%d" % (tree, me)), os.O_RDWR)
    ack(ack_fd, tree, me)
    buf = b""
    while True:
        try:
            chunk = os.read(ctl, 4096)
        except InterruptedError:
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            w = line.decode().split()
            if not w:
                continue
            op = w[0]
            if op == "fork":
                child = int(w[1])
                flags = set(w[2:])
                pid = os.fork()
                if pid == 0:
                    os.close(ctl)
                    become(d, tree, child, ack_fd, dev, lib, flags)
                    os._exit(0)
            elif op == "daemon":
                b, c = int(w[1]), int(w[2])
                flags = set(w[3:])
                pid = os.fork()
                if pid == 0:
                    try:
                        os.close(ctl)
                        setup_child()
                        os.setsid()
                        if os.fork() == 0:
                            become(d, tree, c, ack_fd, dev, lib, flags & {"exec"})
                    finally:
                        os._exit(0)
                while True:
                    try:
                        os.waitpid(pid, 0)
                        break
                    except InterruptedError:
                        continue
                    except ChildProcessError:
                        break
            elif op == "ctx":
                g = int(w[1])
                fds = [os.open(os.path.join(dev, n), os.O_RDWR)
                       for n in ("nvidiactl", "nvidia-uvm", "nvidia%d" % g)]
                OWNED.setdefault(me, []).extend(fds)
                with open(lib, "rb") as f:
                    MAPS.append(mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE,
                                          prot=mmap.PROT_READ))
                ack(ack_fd, tree, me)
            elif op == "hup":
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                ack(ack_fd, tree, me)
            elif op == "close":
                for owner in [o for o in OWNED if o != me]:
                    for fd in OWNED.pop(owner):
                        os.close(fd)
                ack(ack_fd, tree, me)
            elif op == "reap":
                pid = int(w[1])
                try:
                    os.waitpid(pid, 0)
                    ack(ack_fd, tree, me)
                except ChildProcessError:
                    ack(ack_fd, tree, me, "notmine")
            elif op == "exit":
                os._exit(0)


def become(d, tree, me, ack_fd, dev, lib, flags):
    """In a fresh child: the flags of its fork, then exec or serve."""
    setup_child()
    if "setsid" in flags:
        os.setsid()
    elif "pgrp" in flags:
        os.setpgid(0, 0)
    if "nohup" in flags:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if "exec" in flags:
        # the device descriptors are close-on-exec (Python's default), as CUDA's are
        os.execv(PY, [PY, "-S", os.path.abspath(__file__), "proc", d, str(tree), str(me), dev, lib])
    serve(d, tree, me, ack_fd, dev, lib)


def proc_main(argv):
    d, tree, me, dev, lib = argv[0], int(argv[1]), int(argv[2]), argv[3], argv[4]
    setup_child()
    OWNED.clear()
    ack_fd = os.open(os.path.join(d, "ack"), os.O_WRONLY)
    serve(d, tree, me, ack_fd, dev, lib)


def launcher_main(d, tree, ack_fd, dev, lib):
    setup_child()
    os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

    def reap(_s, _f):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    signal.signal(signal.SIGCHLD, reap)
    serve(d, tree, 2, ack_fd, dev, lib, launcher=True)


# ---------------------------------------------------------------------------- the model


class P:
    def __init__(self, pid_id, ppid, infra=False, root=False, job=0):
        self.id = pid_id
        self.st = "S"  # S alive, Z zombie, None gone
        self.ppid = ppid
        self.infra = infra
        self.root = root
        self.job = job
        self.ctx = -1
        self.fds = set()  # the owners whose descriptors it holds
        self.hup = False
        self.daemon = False
        self.flags = ""


class Model:
    """Just enough of Linux to pick events that apply (the truth is read from /proc)."""

    def __init__(self):
        self.p = {}

    def alive(self, user=True):
        return [k for k, v in sorted(self.p.items())
                if v.st == "S" and (not user or not v.infra)]

    def zombies(self):
        # only zombies whose parent is a live user process can be reaped by an event
        return [k for k, v in sorted(self.p.items())
                if v.st == "Z" and v.ppid in self.p and self.p[v.ppid].st == "S"
                and not self.p[v.ppid].infra]

    def spawn(self, parent, child, flags):
        par = self.p[parent]
        c = P(child, parent)
        c.fds = set() if "exec" in flags else set(par.fds)
        c.hup = par.hup or "nohup" in flags
        c.root = par.infra or "setsid" in flags
        c.job = child if c.root else par.job
        c.flags = " ".join(sorted(flags))
        self.p[child] = c
        return c

    def die(self, k):
        d = self.p[k]
        d.fds = set()
        d.st = "Z"
        if d.infra:
            d.st = None  # the launcher's parent (the builder) ignores SIGCHLD
        for c in self.p.values():
            if c.st and c.ppid == k:
                c.ppid = 1
                if c.st == "Z":
                    c.st = None  # init reaps
        if d.ppid == 1 or (d.ppid in self.p and self.p[d.ppid].infra and self.p[d.ppid].st == "S"):
            d.st = None

    def apply(self, e):
        op, a = e[0], e[1]
        if op == "shell":
            self.p[a] = P(a, 0, infra=True)
        elif op == "fork":
            self.spawn(a, e[2], set(e[3:]))
        elif op == "daemon":
            c = self.spawn(a, e[3], set(e[4:]) | {"setsid"})
            c.root, c.job, c.daemon = True, e[3], True
            c.ppid = 1  # its first parent, the middle process, exited: init adopted it
            if "exec" in e[4:]:
                c.fds = set()
        elif op == "ctx":
            self.p[a].ctx = e[2]
            self.p[a].fds.add(a)
        elif op == "hup":
            self.p[a].hup = True
        elif op == "close":
            self.p[a].fds &= {a}
        elif op == "exit":
            self.die(a)
        elif op == "reap":
            self.p[a].st = None

    def listed(self, owner):
        return self.p[owner].ctx >= 0 and any(
            q.st == "S" and owner in q.fds for q in self.p.values())


def fmt_event(e):
    return " ".join(str(x) for x in e)


def fmt_tree(evs):
    return "; ".join(fmt_event(e) for e in evs)


def parse_tree(text):
    evs = []
    for part in text.split(";"):
        w = part.split()
        if not w:
            continue
        nums = 3 if w[0] == "daemon" else 2 if w[0] in ("fork", "ctx") else 1
        evs.append(tuple([w[0]] + [int(x) for x in w[1:1 + nums]] + w[1 + nums:]))
    return evs


def generate(seed):
    """A random tree, after fz_generate (tests/unit/test_lifecycle_fuzz.c)."""
    r = random.Random(seed)
    m = Model()
    evs = [("shell", 2)]
    m.apply(evs[0])
    nxt = 3
    for _ in range(4 + r.randrange(20)):
        if nxt + 2 > MAXPROC + 1:
            break
        x = r.randrange(100)
        users = m.alive()
        user = r.choice(users) if users else 0
        if x < 15 or not user:
            if m.p[2].st != "S":
                break
            fl = ["exec"]
            if r.randrange(100) < 50:
                fl.append("pgrp")
            if r.randrange(100) < 20:
                fl.append("nohup")
            if r.randrange(100) < 15:
                fl.append("setsid")
            e = ("fork", 2, nxt, *fl)
            nxt += 1
        elif x < 45:
            fl = []
            if r.randrange(100) < 25:
                fl.append("exec")
            if r.randrange(100) < 10:
                fl.append("pgrp")
            if r.randrange(100) < 15:
                fl.append("setsid")
            e = ("fork", user, nxt, *fl)
            nxt += 1
        elif x < 50:
            e = ("daemon", user, nxt, nxt + 1) + (("exec",) if r.randrange(100) < 30 else ())
            nxt += 2
        elif x < 65:
            # roots open contexts most: the main process of a training job
            for _t in range(3):
                if m.p[user].root and m.p[user].ctx < 0:
                    break
                user = r.choice(users)
            if m.p[user].ctx >= 0:
                continue
            e = ("ctx", user, r.randrange(2))
        elif x < 67:
            e = ("hup", user)
        elif x < 71:
            e = ("close", user)
        elif x < 90:
            # roots die most: the main process crashed or was killed
            for _t in range(2):
                if m.p[user].root:
                    break
                user = r.choice(users)
            e = ("exit", 2 if m.p[2].st == "S" and r.randrange(100) < 4 else user)
        else:
            z = m.zombies()
            if not z:
                continue
            e = ("reap", r.choice(z))
        evs.append(e)
        m.apply(e)
    return evs


# ---------------------------------------------------------------------------- /proc


def stat(pid):
    """(state, ppid, pgrp, sid, starttime) of pid, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[2]), int(rest[3]), rest[19]


def real_state(pid, start):
    s = stat(pid)
    if s is None or s[4] != start or s[0] == "X":
        return "gone"
    return "zombie" if s[0] == "Z" else "alive"


def held_nodes(pid, dev):
    out = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if t.startswith(dev + "/nvidia"):
                out.add(os.path.basename(t))
    except OSError:
        pass
    return out


def wait_until(cond, timeout=ACK_TIMEOUT):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


# ---------------------------------------------------------------------------- build


class Builder:
    def __init__(self, a):
        self.a = a
        self.d = a.dir
        self.dev = os.path.abspath(a.dev)
        ackp = os.path.join(self.d, "ack")
        os.mkfifo(ackp)
        self.ack_fd = os.open(ackp, os.O_RDWR)
        self.buf = b""
        self.rec = open(a.record, "a") if a.record else None

    def wait_ack(self, tree, pid_id):
        end = time.monotonic() + ACK_TIMEOUT
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                t, i, pid, what = line.decode().split()
                if int(t) == tree and int(i) == pid_id:
                    return int(pid), what
            left = end - time.monotonic()
            if left <= 0:
                raise RuntimeError("tree %d: no answer from process %d" % (tree, pid_id))
            rd, _, _ = select.select([self.ack_fd], [], [], left)
            if rd:
                self.buf += os.read(self.ack_fd, 4096)

    def send(self, tree, pid_id, text):
        fd = os.open(os.path.join(self.d, "ctl.%d.%d" % (tree, pid_id)), os.O_WRONLY)
        os.write(fd, (text + "\n").encode())
        os.close(fd)

    def record(self, pid):
        s = stat(pid)
        if self.rec and s:
            self.rec.write("fuzz %d %s\n" % (pid, s[4]))
            self.rec.flush()
        return s[4] if s else "-"

    def fifo(self, tree, pid_id):
        os.mkfifo(os.path.join(self.d, "ctl.%d.%d" % (tree, pid_id)))

    def build(self, tree, evs):
        m = Model()
        real = {}  # id -> (pid, start)
        for e in evs:
            op, a = e[0], e[1]
            if os.environ.get("RF_DEBUG"):
                sys.stderr.write("%.3f %s\n" % (time.monotonic(), fmt_event(e)))
            if op == "shell":
                self.fifo(tree, a)
                pid = os.fork()
                if pid == 0:
                    try:
                        launcher_main(self.d, tree, self.ack_fd, self.dev, self.a.lib)
                    finally:
                        os._exit(0)
                self.wait_ack(tree, a)
                real[a] = (pid, self.record(pid))
            elif op == "fork":
                self.fifo(tree, e[2])
                self.send(tree, a, fmt_event(("fork",) + e[2:]))
                pid, _ = self.wait_ack(tree, e[2])
                real[e[2]] = (pid, self.record(pid))
            elif op == "daemon":
                self.fifo(tree, e[3])
                self.send(tree, a, fmt_event(("daemon",) + e[2:]))
                pid, _ = self.wait_ack(tree, e[3])
                real[e[3]] = (pid, self.record(pid))
            elif op in ("ctx", "hup", "close"):
                self.send(tree, a, fmt_event((op,) + e[2:]))
                self.wait_ack(tree, a)
            elif op == "exit":
                pid, start = real[a]
                os.kill(pid, signal.SIGKILL)
                if not wait_until(lambda: real_state(pid, start) != "alive"):
                    raise RuntimeError("tree %d: %d (pid %d) does not die" % (tree, a, pid))
            elif op == "reap":
                pid, start = real[a]
                par = m.p[a].ppid
                self.send(tree, par, "reap %d" % pid)
                self.wait_ack(tree, par)
            m.apply(e)
        # the kernel's part is done when each process is in the state the model says
        def settled():
            for k, v in m.p.items():
                st = real_state(*real[k])
                want = {"S": "alive", "Z": "zombie", None: "gone"}[v.st]
                # init (or whoever adopted it) reaps when it will: a zombie left to it is as
                # good as gone for the labels
                if st != want and not (want == "gone" and st == "zombie"):
                    if os.environ.get("RF_DEBUG"):
                        sys.stderr.write("%.3f unsettled %d %s %s\n" % (time.monotonic(), k, st, want))
                    return False
            return True
        if os.environ.get("RF_DEBUG"):
            sys.stderr.write("%.3f settle\n" % time.monotonic())
        wait_until(settled, 5)
        return m, real


def cmd_build(a):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # launchers that exit are reaped at once
    b = Builder(a)
    cases = []
    if a.case:
        cases.append((a.seed, parse_tree(a.case)))
    else:
        for i in range(a.first, a.first + a.trees):
            s = a.seed * 1000 + i
            cases.append((s, generate(s)))
    lines, labels = [], []
    for tree, (seed, evs) in enumerate(cases):
        m, real = b.build(tree, evs)
        procs = {}
        for k, v in m.p.items():
            pid, start = real[k]
            procs[k] = {"pid": pid, "start": start, "infra": v.infra, "root": v.root,
                        "job": v.job, "daemon": v.daemon, "ctx": v.ctx,
                        "fds": sorted(v.fds), "model_st": v.st, "hup": v.hup,
                        "ppid_id": v.ppid}
            if m.listed(k):
                gib = 1 + pid % 4
                lines.append("proc gpu=%d pid=%d type=compute mem=%dGiB sm=0" % (v.ctx, pid, gib))
                procs[k]["listed"] = True
        labels.append({"tree": tree, "seed": seed, "events": fmt_tree(evs), "procs": procs})
    with open(os.path.join(a.dir, "procs.lines"), "w") as f:
        f.write("".join(x + "\n" for x in lines))
    with open(os.path.join(a.dir, "labels.json"), "w") as f:
        json.dump({"dev": b.dev, "trees": labels}, f)
    return 0


# ---------------------------------------------------------------------------- check


def cmd_check(a):
    with open(os.path.join(a.dir, "labels.json")) as f:
        lab = json.load(f)
    dev = lab["dev"]
    doc = json.load(open(a.doctor))
    plan = json.load(open(a.plan))
    verdicts = {}  # pid -> (confidence, verdict object)
    named = set()  # every pid some orphan-holder finding names
    for fi in doc.get("findings", []):
        if fi.get("rule") != "orphan-holder":
            continue
        for v in fi.get("verdicts", []):
            verdicts[v["pid"]] = (v.get("confidence"), v)
        for p in fi.get("pids", []):
            named.add(p)
    actions = {p["pid"]: p for p in plan.get("processes", [])}
    strict_fail = 0
    stats = {"trees": 0, "procs": 0, "P1": 0, "P3": 0, "P3known": 0, "P2miss": 0, "P2asked": 0,
             "runner": 0, "signalled": 0, "high": 0}
    for t in lab["trees"]:
        stats["trees"] += 1
        procs = {int(k): v for k, v in t["procs"].items()}
        st = {k: real_state(v["pid"], v["start"]) for k, v in procs.items()}
        probs = []
        # the runner's own check: what /proc says each live process holds is what the model says
        for k, v in procs.items():
            want = {"S": "alive", "Z": "zombie", None: "gone"}[v["model_st"]]
            if st[k] != want and not (want == "gone" and st[k] == "zombie"):
                probs.append(("runner", k, "state %s, the model says %s" % (st[k], want)))
            if st[k] == "alive":
                nodes = held_nodes(v["pid"], dev)
                mw = set()
                for o in v["fds"]:
                    mw |= {"nvidiactl", "nvidia-uvm", "nvidia%d" % procs[o]["ctx"]}
                if nodes != mw:
                    probs.append(("runner", k, "holds %s, the model says %s" %
                                  (sorted(nodes), sorted(mw))))

        def root_alive(k):
            return st[procs[k]["job"]] == "alive"

        def healthy(k):
            return procs[k]["root"] or root_alive(k)

        def known_limit(k):
            # "worker's worker of a live daemon" (fz_fixed, known): the process holds the
            # descriptors of a dead worker's context of a job whose root, a daemon, lives
            v = procs[k]
            j = procs[v["job"]] if v["job"] else None
            return bool(j and j["daemon"] and root_alive(k) and any(
                o != v["job"] and o != k and st[o] != "alive" for o in v["fds"]))

        for k, v in procs.items():
            pid = v["pid"]
            stats["procs"] += 1
            act = actions.get(pid)
            if act and act.get("action") == "signal":
                stats["signalled"] += 1
                if v["infra"] or healthy(k):
                    probs.append(("P1", k, "clean would signal it (%s)" %
                                  ("a job root" if v["root"] else
                                   "the launcher" if v["infra"] else "its job's root lives")))
            conf = verdicts.get(pid, (None, None))[0]
            if conf == "high":
                stats["high"] += 1
                if not v["infra"] and healthy(k):
                    probs.append(("P3known" if known_limit(k) else "P3", k,
                                  "orphan-holder at high confidence (%s)" %
                                  ("a job root" if v["root"] else "its job's root lives")))
            # P2, report-only
            r = v["job"]
            if (not v["infra"] and not healthy(k) and st[k] == "alive" and r in v["fds"]
                    and procs[r].get("listed")):
                par = procs.get(v["ppid_id"])
                # a process whose parent lives and holds nothing is not weighed
                # (fz_adoption_unseen's last clause)
                if par and st[v["ppid_id"]] == "alive" and not par["infra"] and \
                        not par["fds"] and par["ctx"] < 0:
                    continue
                stats["P2asked"] += 1
                if pid not in verdicts and pid not in named:
                    probs.append(("P2miss", k, "idle, holds its dead root's descriptors, "
                                  "charged to the root: in no orphan-holder finding"))
        if not probs:
            continue
        kinds = sorted({p[0] for p in probs})
        for p in probs:
            stats[p[0]] += 1
        bad = [p for p in probs if p[0] in ("P1", "P3", "runner")]
        if bad:
            strict_fail += 1
        print("# tree %d (seed %d): %s" % (t["tree"], t["seed"], " ".join(kinds)))
        print("#   VG_REALFUZZ_CASE='%s'" % t["events"])
        for kind, k, what in probs:
            pid = procs[k]["pid"]
            tag = {"P2miss": "note P2 (report-only)", "P3known": "known limit P3"}.get(kind, kind)
            print("#   %s: %d (pid %d): %s" % (tag, k, pid, what))
            vv = verdicts.get(pid, (None, None))
            if vv[1]:
                print("#     doctor: %s score %s: %s" % (vv[0], vv[1].get("score"), ", ".join(
                    "%s%+d" % (f["fact"], f["weight"]) for f in vv[1].get("facts", []))))
            if pid in actions:
                ac = actions[pid]
                print("#     clean: %s" % json.dumps({x: ac.get(x) for x in
                                                     ("action", "reason", "verdict", "refusal")
                                                     if x in ac}))
        print("#     id   pid  ppid  pgrp   sid state   root  job  ctx  fds-of     hup  label")
        for k, v in sorted(procs.items()):
            s = stat(v["pid"]) if st[k] != "gone" else None
            lbl = ("infra" if v["infra"] else
                   ("root, " + ("lives" if st[k] == "alive" else "gone")) if v["root"] else
                   ("healthy" if healthy(k) else "job ended"))
            print("#   %4d %5d %5s %5s %5s %-7s %4s %4d %4s  %-9s %4s  %s" % (
                k, v["pid"], s[1] if s else "-", s[2] if s else "-", s[3] if s else "-",
                st[k], "yes" if v["root"] else "-", v["job"],
                ("g%d%s" % (v["ctx"], "" if v.get("listed") else "x")) if v["ctx"] >= 0 else "-",
                ",".join(map(str, v["fds"])) or "-", "ign" if v["hup"] else "-", lbl))
    print("# realfuzz: %(trees)d trees, %(procs)d processes; clean would signal %(signalled)d, "
          "%(high)d high-confidence leftovers; P1 failures %(P1)d, P3 failures %(P3)d "
          "(+%(P3known)d in the known limits), P2 asked %(P2asked)d, missed %(P2miss)d "
          "(report-only); runner mismatches %(runner)d" % stats)
    with open(os.path.join(a.dir, "stats.json"), "w") as f:
        json.dump(stats, f)
    return 1 if strict_fail else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "proc":
        proc_main(sys.argv[2:])
        return 0
    global json, random
    import argparse
    import json
    import random
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--dir", required=True)
    b.add_argument("--dev", required=True)
    b.add_argument("--lib", required=True)
    b.add_argument("--seed", type=int, default=1)
    b.add_argument("--trees", type=int, default=10)
    b.add_argument("--first", type=int, default=0)
    b.add_argument("--case")
    b.add_argument("--record")
    c = sub.add_parser("check")
    c.add_argument("--dir", required=True)
    c.add_argument("--doctor", required=True)
    c.add_argument("--plan", required=True)
    a = ap.parse_args()
    signal.alarm(LIFETIME)
    return cmd_build(a) if a.cmd == "build" else cmd_check(a)


if __name__ == "__main__":
    sys.exit(main())
