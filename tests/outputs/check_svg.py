#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# Independent reader for `stackprobe report --format svg` (tests/test_outputs.c).
#
#   check_svg.py FILE.svg FOLDED.txt [SCRIPT_OUT.js]
#
# Parses FILE as XML (xml.etree, not our code) and checks: it is an SVG
# with an inline script and no external reference (no href/src attribute,
# no http(s) URL other than the SVG namespace); the samples graph holds a
# frame for every frame name of the folded report (thread labels included),
# its root frame counts all the folded samples and each thread frame counts
# that thread's folded samples. With SCRIPT_OUT, writes the inline script
# there (for a syntax check with node --check). Prints a JSON summary; exit
# 1 on a mismatch.
import json
import re
import sys
import xml.etree.ElementTree as ET

NS = '{http://www.w3.org/2000/svg}'


def fail(msg):
    print('check_svg: ' + msg, file=sys.stderr)
    sys.exit(1)


def esc(s):
    return s.replace(';', ':').replace('\n', ' ').replace('\r', ' ')


svg_path, folded_path = sys.argv[1], sys.argv[2]
raw = open(svg_path, encoding='utf-8').read()
root = ET.fromstring(raw)
if root.tag != NS + 'svg':
    fail('root element is ' + root.tag)
scripts = root.findall('.//' + NS + 'script')
if not scripts:
    fail('no inline script (hover and zoom need one)')
if len(sys.argv) > 3:
    with open(sys.argv[3], 'w', encoding='utf-8') as f:
        f.write(''.join(s.text or '' for s in scripts))
for el in root.iter():
    for k in el.attrib:
        if k.endswith('href') or k == 'src':
            fail('external reference: <%s %s=...>' % (el.tag, k))
for url in re.findall(r'https?://[^\s"\'<>]+', raw):
    if url != 'http://www.w3.org/2000/svg':
        fail('URL in the file: ' + url)

graphs = {g.get('id'): g for g in root.iter(NS + 'g') if g.get('class') == 'graph'}
if 'samples' not in graphs:
    fail('no samples graph')


def frames(graph):
    out = []
    for g in graph.iter(NS + 'g'):
        if g.get('class') != 'f':
            continue
        title = g.find(NS + 'title')
        if title is None or g.find(NS + 'rect') is None:
            fail('frame without title or rect')
        t = title.text or ''
        i = t.rfind(' (')
        out.append((t[:i], t[i + 2:], int(g.get('data-d'))))
    return out


want_names, per_thread, total = set(), {}, 0
for line in open(folded_path, encoding='utf-8', errors='replace'):
    line = line.rstrip('\n')
    if not line:
        continue
    stack, n = line.rsplit(' ', 1)
    parts = stack.split(';')
    want_names.update(parts)
    per_thread[parts[0]] = per_thread.get(parts[0], 0) + int(n)
    total += int(n)

fs = frames(graphs['samples'])
names = {esc(n) for n, _, _ in fs}
missing = sorted(want_names - names)
if missing:
    fail('%d folded frame names not in the SVG, e.g. %r' % (len(missing), missing[:5]))
count = lambda share: int(re.match(r'(\d+) sample', share).group(1))
roots = [f for f in fs if f[2] == 0]
if len(roots) != 1 or count(roots[0][1]) != total:
    fail('root frame %r, want one with %d samples' % (roots, total))
threads = {esc(n): count(s) for n, s, d in fs if d == 1}
if threads != per_thread:
    fail('thread frames %r, folded says %r' % (threads, per_thread))
pause = frames(graphs['pause']) if 'pause' in graphs else []
print(json.dumps({'frames': len(fs), 'names': len(names), 'samples': total,
                  'threads': len(threads), 'pause_frames': len(pause)}))
