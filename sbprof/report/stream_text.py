"""The definitions a stream job's report prints under its tables (:mod:`sbprof.report.stream`), one block per
table, in the units the tables show (ms, kB, MB, µs)."""
from __future__ import annotations

from sbprof.analysis.stream_criterion import BEHIND_SLOPE

CAPACITY_DEFINITIONS = f"""\
- **streams per machine**: the largest number of concurrent streams one process serves whose **p99 delay**
  (from the arrival of a chunk's last sample to its output, over every chunk that holds audio) stays within
  the **delay target** (`capacity.p99_delay_ms`; default one chunk duration) and does not grow along the
  utterance (delay growth <= {BEHIND_SLOPE} s per s), with no chunk left unserved. Found by bisection on the
  stream count from the delays each probe recorded, then the counts at the boundary probed again
  (`capacity.boundary_probes` times each, 3 unless set): the capacity is the largest count at which at least
  half of the probes passed (median over runs when several). **[range]**: from one below the smallest count at
  which any probe failed to the largest at which any passed: how far the boundary moved between repeated
  probes as the machine's load came and went (the same count on a quiet machine). The probes of the first run
  are listed: streams: p99 delay (ms) of each probe, and *behind* when the delay grew or chunks went unserved.
- **p99 delay at capacity**: the median over the probes at that count of their p99 delay.
- **wait for a core at capacity**: how long the server's thread waited for a core (runnable, another process
  on its core: `/proc/thread-self/schedstat`) over the length of the probes at that count: the load the
  capacity was found under; each per cent of it takes about a per cent of the server's time, and of the streams.
- **worst-case compute budget**: floor(chunk duration / p99 chunk compute), the p99 over every chunk served at
  the capacity (every probe of that count; one stream when none passed), with the interval the p99's order
  statistics give: how many streams fit if every chunk cost the p99 and no idle time absorbed it. A lower bound,
  not where the server falls behind; it does not depend on which other counts the search probed.
- **state per stream**: the bytes one stream's streaming context keeps between its chunks (median over
  streams), after its last chunk: **held**, every storage its tensors keep alive, whole (a cache sliced out of
  a larger buffer keeps the whole buffer): what a stream costs the server's memory; **(addressed)**: the bytes
  those tensors span (each storage's spans once): what the model reads back, and what the stream would cost
  if its caches were copied out of the buffers they were cut from.
- **memory per added stream**: the least-squares slope, with its 95 % interval, of what each probe added to the
  process's memory (its peak over the memory in use before it: resident set on CPU, from the kernel's
  high-water mark reset before the probe; allocated on CUDA) over the probes' stream counts: state, buffers
  and allocator growth together. Given from 3 stream counts or more, otherwise not (a line through two points
  has no interval).
- **server's own time per chunk**: the median time the server spent between two `transcribe_chunk` calls when
  the next chunk was already waiting (its bookkeeping: two clock reads and a row of figures), in µs: busy time
  a server without sbprof would not spend, to be read against the chunk's compute (n/a with fewer than 20 such
  chunks: a preemption between two calls would be most of them).
- **offline RTFx**: seconds of the utterance / time to transcribe it in one `transcribe_chunk` call (one chunk
  spanning it: full attention, as offline), median of 5 calls after 1 unmeasured, with their range (runs
  pooled). As many streams as the offline RTFx is what offline throughput would promise."""

COMPUTE_DEFINITIONS = """\
- **chunk**: encoder frames per chunk (`DynChunkTrainConfig.chunk_size`) and the audio it holds;
  **left context**: past chunks each chunk attends to (unlimited: every past chunk of the utterance).
- **chunks**: chunk calls timed (all streams and runs; the short last chunk and the zero chunk that flushes
  the feature extractor included). A session whose next chunk had waited more than `max_backlog_s` stopped
  there: *stopped* rows count the chunks left unserved, and their figures cover only the chunks served.
- **p50 ... max**: percentiles of chunk compute latency, the wall clock around one `transcribe_chunk` call (ms);
  **p99 interval**: a distribution-free ~95 % interval of the p99 from order statistics (`+`: too few chunks
  to bound it above; the largest chunk is shown).
- **streaming RTF**: chunk compute / seconds of audio served (compute per second of speech);
  **utilisation**: chunk compute / the session's length (the server's busy share).
- **CPU cost**: core-seconds per second of audio: the process's CPU time (user + system, all its threads) during
  one full chunk's `transcribe_chunk` call / the chunk's seconds of audio; median over full chunks, with a
  distribution-free ~95 % interval. What a CPU costs to serve this model, independent of waiting for a core (a
  call that waited for one reads the same). With several threads it includes threads that spin while waiting
  (OpenMP), so it can exceed the busy share of one core; on CUDA it is the host's CPU, its wait for the GPU
  included.
- **tokens/chunk**: tokens emitted (flush chunks' included) per chunk holding audio: a mean; **tokens/s**: per
  second of audio.
- **cost growth**: median compute of the last third of full chunks along the utterance over that of the first
  third (chunk 0 left out): about 1 when the left context is bounded.
- **compute budget**: chunk duration / (streams x p99 compute), the worst case (every chunk at the p99, none
  overlapping idle time); below 1 does *not* mean the server falls behind: see delay growth."""

PACING_DEFINITIONS = f"""\
- Chunks are fed at the pace the audio would arrive (traffic: see the header) and one loop serves every
  stream in order of arrival, sleeping when it is ahead; when compute falls behind, chunks queue.
- **algorithmic latency**: chunk duration + the feature extractor's look-ahead (the last frames of a chunk
  come out with the next one): what a chunk's first sample waits before any compute.
- **delay steady p50 / p99**: from the arrival of a chunk's last sample to its output (queue + compute), every
  chunk holding audio but a session's last; **end of utterance p99**: the same for the chunk holding a
  session's last sample (an end burst shows here).
- **delay growth**: least-squares slope of delay against arrival time (ms of delay per s); *behind* above
  {BEHIND_SLOPE * 1e3:g} ms/s (the backlog grows) or when chunks went unserved.
- **first token**: from the speech onset (the first 10 ms frame within 30 dB of the loudest) to the output of
  a session's first chunk that emitted a token (median over sessions that start with the utterance).
- **final result**: from the utterance's last sample to the output of the session's last (flush) chunk
  (median over sessions that end).
- **state per stream**: the bytes a session's streaming context keeps after its last chunk (median), held
  (every storage its tensors keep alive, whole) and, in parentheses, addressed (what those tensors span).
- **process peak**: the whole process's peak resident memory during the cell (model included; on CUDA the
  allocator's peak)."""

EMISSION_DEFINITIONS = """\
- **emission latency**: for each token the model emitted, the output time of its chunk minus the reference end
  of the unit at the same position in `streaming.alignment` (token k against unit k), over sessions that start
  with the utterance; p50 and p99 over tokens. Negative: emitted before the reference says it was spoken."""

LONE_STREAM_NOTE = """\
One stream alone, paced, leaves the server idle between chunks; each chunk then pays for waking up (caches,
threads), so its compute is higher than a busy server's: {ratio} here (p50 compute of the 1-stream probe over
that of the largest passing probe). Read the one-stream rows as one caller on an idle machine, not as a
server's cost per chunk."""
