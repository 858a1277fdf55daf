#!/usr/bin/env python3
"""Layout check: no dependency loop between source files, no file too long.

    layout_check.py OBJDIR [--max-lines N]
    layout_check.py --selftest     the check finds a loop it is shown

A file depends on another when it calls or reads a symbol the other defines
(nm over the objects: only the project's own names, sprobe* and cli_*, so
the agent's interposed libc functions are not edges) or includes the header
named after it (x.c including x.h's sibling: "dir/x.h" with a dir/x.c).
Shared type headers (x_internal.h, with no x_internal.c) are no edge: they
are how a folder shares its types one way. Exit 1 on a loop or a source file
over the limit, listing each.
"""
import collections, os, re, subprocess, sys

def selftest():
    """Two files calling each other, and a third that only calls: one loop,
    named, and exit 1; the third alone: exit 0."""
    import shutil, tempfile
    top = tempfile.mkdtemp()
    try:
        os.makedirs(os.path.join(top, 'userspace/x'))
        os.makedirs(os.path.join(top, 'obj/userspace/x'))
        srcs = {'a': 'void sprobe_b(void); void sprobe_a(void) { sprobe_b(); }',
                'b': 'void sprobe_a(void); void sprobe_b(void) { sprobe_a(); }',
                'c': 'void sprobe_a(void); void sprobe_c(void) { sprobe_a(); }'}
        for n, code in srcs.items():
            with open(os.path.join(top, 'userspace/x/%s.c' % n), 'w') as f:
                f.write(code + '\n')
            subprocess.run(['cc', '-c', '-o', os.path.join(top, 'obj/userspace/x/%s.o' % n),
                            os.path.join(top, 'userspace/x/%s.c' % n)], check=True)
        here = os.getcwd()
        os.chdir(top)
        try:
            out = subprocess.run([sys.executable, os.path.abspath(os.path.join(here, __file__)), 'obj'],
                                 capture_output=True, text=True)
            ok = out.returncode == 1 and 'loop between userspace/x/a.c userspace/x/b.c' in out.stdout \
                and 'x/c.c' not in out.stdout.split('\n')[0]
            os.remove('obj/userspace/x/b.o')
            os.remove('userspace/x/b.c')
            out2 = subprocess.run([sys.executable, os.path.abspath(os.path.join(here, __file__)), 'obj'],
                                  capture_output=True, text=True)
            ok = ok and out2.returncode == 0
        finally:
            os.chdir(here)
        print('layout selftest: %s' % ('the check finds the loop' if ok else 'FAILED: ' + out.stdout + out2.stdout))
        return 0 if ok else 1
    finally:
        shutil.rmtree(top)

def main():
    if sys.argv[1] == '--selftest':
        return selftest()
    objdir = sys.argv[1]
    max_lines = 800
    if '--max-lines' in sys.argv:
        max_lines = int(sys.argv[sys.argv.index('--max-lines') + 1])
    objs = {}
    for root, _, files in os.walk(objdir):
        for f in files:
            if not f.endswith('.o'):
                continue
            p = os.path.join(root, f)
            src = os.path.relpath(p, objdir)[:-2] + '.c'
            if src.startswith(('tests/', 'bench/', 'examples/')) or not os.path.exists(src):
                continue
            objs[src] = p
    defs, uses = {}, collections.defaultdict(set)
    for src, o in objs.items():
        out = subprocess.run(['nm', o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            p = line.split()
            if len(p) == 2 and p[0] == 'U':
                uses[src].add(p[1])
            elif len(p) == 3 and p[1] in 'TDBRVWCG':
                defs.setdefault(p[2], src)
    g = collections.defaultdict(dict)   # a -> b -> reason
    for a in objs:
        for s in uses[a]:
            b = defs.get(s)
            if b and b != a and s.startswith(('sprobe', 'cli_')):
                g[a].setdefault(b, []).append(s)
        with open(a, errors='replace') as fh:
            for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)\.h"', fh.read(), re.M):
                b = m.group(1) + '.c'
                if b != a and b in objs:
                    g[a].setdefault(b, []).append('#include "%s.h"' % m.group(1))
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))
    for v in sorted(objs):
        if v not in index:
            visit(v)
    bad = 0
    for comp in sccs:
        bad += 1
        print('layout: loop between %s' % ' '.join(comp))
        for a in comp:
            for b, why in sorted(g[a].items()):
                if b in comp:
                    print('    %s -> %s: %s' % (a, b, ' '.join(sorted(why)[:5])))
    for top in ('userspace', 'backends', 'table', 'bpf', 'include'):
        for root, _, files in os.walk(top):
            for f in files:
                if not f.endswith(('.c', '.h')):
                    continue
                p = os.path.join(root, f)
                with open(p, errors='replace') as fh:
                    nl = sum(1 for _ in fh)
                if nl > max_lines:
                    bad += 1
                    print('layout: %s has %d lines (over %d: split it along its mechanisms)' % (p, nl, max_lines))
    if not bad:
        print('layout: %d source files, no loop, none over %d lines' % (len(objs), max_lines))
    return 1 if bad else 0

if __name__ == '__main__':
    sys.exit(main())
