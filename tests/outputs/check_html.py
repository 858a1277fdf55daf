#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# Independent reader for `stackprobe report --format html` (tests/test_outputs.c).
#
#   check_html.py FILE.html FOLDED.txt [TRACE.json] [SCRIPT_OUT.js] [EXPECT_NAME ...]
#
# Parses FILE with python's html.parser (not our code) and checks the page's
# pieces: exactly one style, one JSON data script (#sp-data) and one inline
# script, no other element (a name that closed the script element would
# add some), no external reference (src/href other than #fragments, no URL,
# no url() in the style), a Content-Security-Policy of default-src 'none';
# the summary, flame graph, process and thread tables, timeline,
# distribution and drops sections. The data (json.loads): the tree's root
# counts all the folded samples, each thread (and process) node what the
# folded report gives it, every folded frame name is in the tree, each
# thread's samples in the table equal its folded samples; with TRACE (the
# trace report of the same file), the timeline holds as many self-reported
# and kernel windows, thread by thread, as its handler and kernel pause
# events (above the page's cap, as many in its time bins). EXPECT_NAME arguments must appear verbatim among the data's names
# (hostile strings survive the escaping; @FILE: one a line). FOLDED '-'
# skips the comparisons with the folded report. With SCRIPT_OUT ('-' for none),
# writes the inline script there (for node --check). Prints a JSON summary;
# exit 1 on a mismatch.
import html.parser
import json
import re
import sys


def fail(msg):
    print('check_html: ' + msg, file=sys.stderr)
    sys.exit(1)


def esc(s):
    return s.replace(';', ':').replace('\n', ' ').replace('\r', ' ')


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = {}
        self.scripts = []	# (attrs, text)
        self.styles = []
        self.ids = set()
        self.refs = []
        self.meta = []
        self._in = None
        self._buf = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if 'id' in a:
            self.ids.add(a['id'])
        for k, v in attrs:
            if k in ('src', 'href', 'action', 'srcset', 'poster', 'data') and not (k == 'href' and v and v.startswith('#')):
                self.refs.append('<%s %s=%r>' % (tag, k, v))
            if k.startswith('on'):
                self.refs.append('<%s %s=...> (event handler attribute)' % (tag, k))
        if tag == 'meta':
            self.meta.append(a)
        if tag in ('script', 'style'):
            self._in = (tag, a)
            self._buf = []

    def handle_endtag(self, tag):
        if self._in and tag == self._in[0]:
            text = ''.join(self._buf)
            (self.scripts if tag == 'script' else self.styles).append((self._in[1], text))
            self._in = None

    def handle_data(self, data):
        if self._in:
            self._buf.append(data)


args = sys.argv[1:]
html_path, folded_path = args[0], args[1]
trace_path = args[2] if len(args) > 2 and args[2] != '-' else None
script_out = args[3] if len(args) > 3 and args[3] != '-' else None
expect_names = []
for a in args[4:]:
    if a.startswith('@'):	# one name a line, from a file (no shell quoting)
        expect_names += open(a[1:], encoding='utf-8').read().split('\n')[:-1]
    else:
        expect_names.append(a)
raw = open(html_path, encoding='utf-8').read()
if not raw.startswith('<!DOCTYPE html>'):
    fail('no <!DOCTYPE html> at the start')
p = Page()
p.feed(raw)
p.close()
if len(p.styles) != 1:
    fail('%d style elements, want 1' % len(p.styles))
data_scripts = [s for s in p.scripts if s[0].get('type') == 'application/json']
code = [s for s in p.scripts if 'type' not in s[0]]
if len(p.scripts) != 2 or len(data_scripts) != 1 or len(code) != 1:
    fail('%d script elements (%d data, %d code), want one of each' % (len(p.scripts), len(data_scripts), len(code)))
if data_scripts[0][0].get('id') != 'sp-data':
    fail('data script has no id sp-data')
if p.refs:
    fail('external reference: ' + ', '.join(p.refs))
if p.tags.get('title') != 1 or p.tags.get('body') != 1:
    fail('%r title and %r body elements' % (p.tags.get('title'), p.tags.get('body')))
for tag in ('img', 'iframe', 'object', 'embed', 'link', 'base', 'form', 'audio', 'video'):
    if p.tags.get(tag):
        fail('<%s> element in the page' % tag)
if re.search(r'https?://', raw):
    fail('URL in the file: ' + re.search(r'https?://\S{0,60}', raw).group(0))
if 'url(' in p.styles[0][1] or '@import' in p.styles[0][1]:
    fail('the style sheet refers to something')
csp = [m.get('content', '') for m in p.meta if m.get('http-equiv', '').lower() == 'content-security-policy']
if not csp or "default-src 'none'" not in csp[0]:
    fail('no Content-Security-Policy with default-src \'none\'')
for i in ('fg', 'fg-search', 'procs', 'threads', 'tl', 'dist', 'drops', 'sum-samples', 'sum-file'):
    if i not in p.ids:
        fail('no element #' + i)
if script_out:
    with open(script_out, 'w', encoding='utf-8') as f:
        f.write(code[0][1])

D = json.loads(data_scripts[0][1])

# The folded report: per thread label (its first frame) and its frames.
folded = {}
for line in open(folded_path, encoding='utf-8') if folded_path != '-' else []:
    line = line.rstrip('\n')
    if not line:
        continue
    stack, n = line.rsplit(' ', 1)
    folded[stack] = folded.get(stack, 0) + int(n)
total = sum(folded.values())
multi = len(D['procs']) > 1
per_root = {}	# first frame (process with several, else thread) -> count
per_thread = {}
frames_seen = set()
for stack, n in folded.items():
    parts = stack.split(';')
    per_root[parts[0]] = per_root.get(parts[0], 0) + n
    th = parts[1] if multi else parts[0]
    per_thread[th] = per_thread.get(th, 0) + n
    frames_seen.update(parts[2 if multi else 1:])

# Rebuild the tree from its preorder.
names, t = D['names'], D['tree']
nodes, pos = [], 0


def rec(depth):
    global pos
    n = {'name': names[t[pos]], 'kind': t[pos + 1], 'v': t[pos + 2], 'p': t[pos + 3], 'kids': []}
    nk = t[pos + 4]
    pos += 5
    nodes.append((depth, n))
    for _ in range(nk):
        n['kids'].append(rec(depth + 1))
    return n


if t:
    root = rec(0)
    if pos != len(t):
        fail('tree array has %d numbers after the root\'s subtree' % (len(t) - pos))
    if root['name'] != 'all' or root['kind'] != 0:
        fail('root is %r' % root['name'])
    if folded_path != '-' and root['v'] != total:
        fail('root counts %d samples, folded %d' % (root['v'], total))
    for depth, n in nodes:
        if sum(k['v'] for k in n['kids']) > n['v']:
            fail('children of %r count more than it' % n['name'])
    got = {esc(k['name']): k['v'] for k in root['kids']}
    if folded_path != '-' and got != per_root:
        fail('top level of the tree %r, folded %r' % (got, per_root))
    if folded_path != '-' and D['pruned'] == 0:
        tree_names = {esc(n['name']) for d, n in nodes if n['kind'] == 3}
        missing = frames_seen - tree_names
        if missing:
            fail('frames of the folded report not in the tree: %r' % sorted(missing)[:10])
elif total:
    fail('empty tree for %d folded samples' % total)
tab = {esc('%s-%d' % (th['name'], th['tid'])): th['samples'] for th in D['threads'] if th['samples']}
if folded_path != '-':
    if D['samples'] != total:
        fail('data says %d samples, folded %d' % (D['samples'], total))
    if tab != per_thread:
        fail('thread table %r, folded %r' % (tab, per_thread))
else:
    total = D['samples']

# The timeline against the trace report's events.
nself = sum(len(th.get('sw', [])) // 2 for th in D['threads'])
nkern = sum(len(th.get('kw', [])) // 4 for th in D['threads'])
if D['tl']['self'] <= D['tl']['max'] and nself != D['tl']['self']:
    fail('timeline holds %d self windows, says %d' % (nself, D['tl']['self']))
# Above the cap a side is sent as bins: every window in exactly one.
for side, one, binned, width in (('self', 'sw', 'sb', 2), ('kernel', 'kw', 'kb', 4)):
    if D['tl'][side] > D['tl']['max']:
        if any(th.get(one) for th in D['threads']):
            fail('%d %s windows, over the cap %d, yet sent one by one' % (D['tl'][side], side, D['tl']['max']))
        nb = sum(sum(th.get(binned, [])[1::4]) for th in D['threads'])
        if nb != D['tl'][side]:
            fail('%s bins hold %d windows of %d' % (side, nb, D['tl'][side]))
        for th in D['threads']:
            b = th.get(binned, [])
            if any(not 0 <= x < D['tl']['bins'] for x in b[0::4]):
                fail('bin index out of range')
    elif any(th.get(binned) for th in D['threads']):
        fail('%s windows binned under the cap' % side)
if trace_path:
    tr = json.load(open(trace_path, encoding='utf-8'))
    hs, ks = {}, {}
    for e in tr['traceEvents']:
        if e.get('name') == 'handler':
            hs[e['tid']] = hs.get(e['tid'], 0) + 1
        elif e.get('cat') == 'kernel' and e.get('name', '').startswith('kernel pause'):
            ks[e['tid']] = ks.get(e['tid'], 0) + 1
    mine_s = {th['tid']: len(th['sw']) // 2 for th in D['threads'] if th.get('sw')}
    mine_k = {th['tid']: len(th['kw']) // 4 for th in D['threads'] if th.get('kw')}
    if D['tl']['self'] > D['tl']['max']:
        mine_s = {th['tid']: sum(th['sb'][1::4]) for th in D['threads'] if th.get('sb')}
    if D['tl']['kernel'] > D['tl']['max']:
        mine_k = {th['tid']: sum(th['kb'][1::4]) for th in D['threads'] if th.get('kb')}
    if mine_s != hs:
        fail('self windows per thread %r, trace handler events %r' % (mine_s, hs))
    if mine_k != ks:
        fail('kernel windows per thread %r, trace kernel pauses %r' % (mine_k, ks))
for n in expect_names:
    if n not in names and not any(th['name'] == n for th in D['threads']) and n not in D['cmdline']:
        fail('%r not among the names, thread names or arguments' % n)
# Windows without a partner, as the kernel-vs-self check counts them.
su = [D['reasons'][r] for th in D['threads'] for r in th.get('su', [])[1::2]]
ku = [D['reasons'][r] for th in D['threads'] for r in th.get('ku', [])[1::2]]
if D['check'] and D['tl']['self'] <= D['tl']['max'] and len(su) != D['check']['overall']['self_only']:
    fail('%d self windows marked unmatched, the check says %d' % (len(su), D['check']['overall']['self_only']))
if D['check'] and D['tl']['kernel'] <= D['tl']['max'] and len(ku) != D['check']['overall']['kernel_only']:
    fail('%d kernel windows marked unmatched, the check says %d' % (len(ku), D['check']['overall']['kernel_only']))
for th in D['threads']:
    for key, one, width in (('su', 'sw', 2), ('ku', 'kw', 4)):
        if any(not 0 <= i < len(th.get(one, [])) // width for i in th.get(key, [])[0::2]):
            fail('unmatched position out of the thread\'s windows')
# Each thread names a process the page lists.
for th in D['threads']:
    if not 0 <= th['proc'] < len(D['procs']):
        fail('thread %d of process %d of %d' % (th['tid'], th['proc'], len(D['procs'])))
print(json.dumps({'samples': total, 'threads': len(D['threads']), 'nodes': len(nodes),
                  'procs': len(D['procs']), 'ends': [p['end'] for p in D['procs']],
                  'su': su, 'ku': ku,
                  'self_windows': nself, 'kernel_windows': nkern, 'bytes': len(raw.encode())}))
