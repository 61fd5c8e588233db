"""Independent re-implementation of the maze rules of docs/tasks.md ("Maze").

Reads records (one "Q : ... [ label ] R : ... A : ... <eos>" sequence per line,
e.g. Example::text() of generate_maze_dataset) and re-derives every trace and
answer; A* records must also be unambiguous under three tie-breaks (smaller g,
first discovered, smaller g then last discovered). Usage:
  python3 maze_crosscheck.py records.txt
Not part of ctest (the C++ suite covers the same rules); a cross-check only.
"""
import math, sys
DV={'N':(-1,0),'E':(0,1),'S':(1,0),'W':(0,-1)}
def rc(w): r,c=w[1:].split('c'); return int(r),int(c)
bad=0; n=0
for line in open(sys.argv[1]):
    t=line.split(); n+=1
    i=t.index('['); j=t.index(']'); lab=t[i:j+1]; r=t.index('R'); a=t.index('A')
    q=t[2:i]; trace=t[r+2:a]; ans=t[a+2:-1]; assert t[-1]=='<eos>'
    op={}; cur=None
    k=q.index('start')
    for w in q[:k]:
        if w in DV: op[cur].append(w)
        else: cur=rc(w); op[cur]=[]
    N=int(round(math.sqrt(len(op)))); start=rc(q[k+1]); goal=rc(q[k+3])
    nm=lambda c:f"r{c[0]}c{c[1]}"
    def nbrs(c): return [(c[0]+DV[d][0],c[1]+DV[d][1]) for d in 'NESW' if d in op[c]]
    # path
    par={start:None}; Q=[start]
    for x in Q:
        for y in nbrs(x):
            if y not in par: par[y]=x; Q.append(y)
    path=[]; c=goal
    while c: path.append(c); c=par[c]
    path=path[::-1]
    def bfs():
        seen={start};Q=[start];out=[]
        while Q:
            c=Q.pop(0);out.append(c)
            if c==goal: return out
            for y in nbrs(c):
                if y not in seen: seen.add(y);Q.append(y)
    def dfs():
        out=[start]; vis={start}; st=[start]
        while True:
            c=st[-1]
            if c==goal: return out
            nx=[y for y in nbrs(c) if y not in vis]
            if nx: vis.add(nx[0]); st.append(nx[0]); out.append(nx[0])
            else: st.pop(); out.append(st[-1])
    h=lambda c:abs(c[0]-goal[0])+abs(c[1]-goal[1])
    def astar(key):
        g={start:0}; ins={start:0}; openl=[start]; out=[]; cnt=1
        while True:
            c=min(openl,key=lambda x:key(x,g,ins)); openl.remove(c); out.append(c)
            if c==goal: return out
            for y in nbrs(c):
                if y not in g: g[y]=g[c]+1; ins[y]=cnt; cnt+=1; openl.append(y)
    def bidir():
        seen=[{start},{goal}]; Q=[[start],[goal]]; out=[]; s=0
        while True:
            c=Q[s].pop(0); out.append(c)
            for y in nbrs(c):
                if y in seen[1-s]: out.append(y); return out
                if y not in seen[s]: seen[s].add(y); Q[s].append(y)
            s=1-s
    def dead():
        filled=set(); out=[]
        while True:
            ch=False
            for r in range(1,N+1):
                for cc in range(1,N+1):
                    c=(r,cc)
                    if c in filled or c in (start,goal): continue
                    if sum(1 for y in nbrs(c) if y not in filled)<=1: filled.add(c); out.append(c); ch=True
            if not ch: return out
    s=t[i:j+1]
    # The strategy is named by its label.
    labels={1:'[ r1c1 r1c2 r2c1 r1c3 r2c2 r3c1 ]',2:'[ r1c1 r1c2 r1c3 r1c4 r1c3 r1c2 ]',3:'[ r1c1 r1c2 r2c2 r2c3 r3c3 r3c4 ]',
            4:f'[ r1c1 r{N}c{N} r1c2 r{N}c{N-1} r1c3 r{N}c{N-2} ]',5:f'[ r{N}c1 r{N}c2 r{N}c3 r1c{N} r2c{N} r3c{N} ]'}
    L=' '.join(lab); S=[k for k,v in labels.items() if v==L]
    if len(S)!=1: print('label?',L); bad+=1; continue
    S=S[0]
    if S==3:
        A=[astar(lambda x,g,ins:(g[x]+h(x),g[x],ins[x])), astar(lambda x,g,ins:(g[x]+h(x),ins[x])), astar(lambda x,g,ins:(g[x]+h(x),g[x],-ins[x]))]
        exp=A[0]
        if not (A[0]==A[1]==A[2]): print('astar ambiguous', n); bad+=1
    else:
        exp={1:bfs,2:dfs,4:bidir,5:dead}[S]()
    if [nm(c) for c in exp]!=trace: print('trace mismatch', n, S); bad+=1
    if [nm(c) for c in path]!=ans: print('answer mismatch', n); bad+=1
    if len(path) < math.ceil(1.5*N): print('short',n); bad+=1
print(n,'records',bad,'problems')
sys.exit(1 if bad else 0)
