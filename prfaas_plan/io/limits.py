"""The ranges every number in a hardware profile or scenario must fall in, each with its reason: far beyond
any real value, and tight enough that the formulas downstream stay finite and the searches within memory.

This is the one table: the YAML loaders check against it, and a command's flags that set a scenario field
(``--n-prfaas``, ``--bandwidth-gbit-per-s``, ...) are edits of the scenario document validated by the same
loader (``io.overrides``), so a value a flag accepts is one a scenario file accepts, and back."""

# Upper limits of every number in a profile or scenario: each far beyond any real value, and small enough that
# the formulas downstream stay finite and the searches stay within memory.
#: Lower limits: below these a figure is a unit mistake, and dividing by it overflows the formulas.
#: A length of under one token; a link under 1 Mbit/s (the --bandwidth-gbit-per-s floor); memory under 1 MB;
#: HBM under 1 MB/s; compute under 1 GFLOP/s; a decode SLO under 0.001 token/s; a KV size under one byte;
#: a lognormal sigma under 0.001 (that is a fixed length: use distribution: fixed).
MIN_TOKENS = 1.0
MIN_LINK_GBIT_PER_S = 1e-3
MIN_MEMORY_GB = 1e-3
MIN_HBM_TB_PER_S = 1e-6
MIN_DENSE_TFLOPS = 1e-3
MIN_DECODE_TOKENS_PER_S = 1e-3
MIN_KV_MIB = 2.0**-20
MIN_SIGMA = 1e-3
#: Tokens in one request: ten times the longest context any released model serves (10M).
MAX_TOKENS = 1e8
#: GPUs in one instance: the largest scale-up domains (NVL576) are under a thousand GPUs.
MAX_GPUS_PER_INSTANCE = 4096
#: Instances in one pool: 80,000 GPUs at 8 per instance, beyond the largest published fleets serving one
#: model. The bound is what the searches and the simulator were measured to handle
#: (tests/benchmarks/fleet_scale.py runs `optimize`, the goodput search and `simulate` at 1,000, 4,000 and
#: 10,000 instances per pool); the goodput search's homogeneous baseline merges both pools into one of up to
#: 2 x MAX_INSTANCES, measured with them.
MAX_INSTANCES = 10_000
#: Requests in one decode batch: a million concurrent sequences on one instance is beyond any engine.
MAX_DECODE_BATCH = 1e6
#: Seconds for one prefill or decode step: a day; a larger figure is a unit mistake.
MAX_STEP_S = 86_400.0
#: The shortest prefill or decode step, in seconds: one kernel launch takes microseconds, so a smaller figure is
#: a unit mistake (and would pin a calibrated efficiency at its bound of 1).
MIN_STEP_S = 1e-6
#: KV size of one request in MiB: 1 PiB, beyond any memory a request could hold.
MAX_KV_MIB = 1e9
#: Datasheet figures: memory (GB), HBM bandwidth (TB/s), dense TFLOP/s, scale-up (GB/s), scale-out (Gbit/s),
#: power (W) and price (USD per GPU-hour), each about a thousand times today's largest part.
MAX_MEMORY_GB = 1e6
MAX_HBM_TB_PER_S = 1e4
MAX_DENSE_TFLOPS = 1e7
MAX_LINK_GB_PER_S = 1e7
MAX_TDP_W = 1e6
MAX_PRICE_USD_PER_HOUR = 1e5
#: Link bandwidth (Gbit/s) of a scenario, of a link profile's steps and mean (``dynamics.link``), of a priced
#: port and of ``size --bandwidths``: a petabit per second. A fleet of MAX_INSTANCES PrfaaS instances at the
#: paper's 100 Gbit/s per 4 instances needs 250 Tbit/s, so the cap sits above that; beyond it squared transfer
#: times underflow in the queueing formulas. (MIN_LINK_GBIT_PER_S, 1 Mbit/s, is the floor of the same fields.)
MAX_LINK_GBIT_PER_S = 1e6
#: A target or offered arrival rate (req/s): a million requests a second, far beyond MAX_INSTANCES' capacity.
MAX_RATE_REQ_PER_S = 1e6
#: Decode speed SLO (tokens/s per request) and TTFT SLO (s): beyond these no plan is meaningful.
MAX_DECODE_TOKENS_PER_S = 1e6
MAX_TTFT_S = 86_400.0
#: A lognormal's log-median mu and spread sigma: exp(30) tokens is far beyond MAX_TOKENS; measured request
#: lengths have sigma under 3, and from sigma of about 9 the partial moments (exp of sigma squared) overflow.
MAX_ABS_MU = 30.0
MAX_SIGMA = 5.0

#: How a link is built (``deployment.link``'s TCP shape, ``physics.tcp``). A round trip of up to 10 s (a
#: geostationary satellite hop is about 0.6 s); up to 65,536 connections (the port numbers of one address
#: pair); a window from 1 KiB (under one segment is a unit mistake) to 1 GiB (TCP's largest with window
#: scaling, 65,535 · 2^14 bytes, RFC 7323); a loss probability of at most 0.5 (beyond it Padhye's model, and
#: any transfer, has left its domain).
MAX_RTT_MS = 1e4
MAX_TCP_CONNECTIONS = 65_536
MIN_WINDOW_MIB = 2.0**-10
MAX_WINDOW_MIB = 1024.0
MAX_LOSS_RATE = 0.5

#: The busiest expert's excess load over the mean (``RooflineParams.moe_load_skew``): 0 is uniform routing;
#: 1,000 would put a thousand times the mean on one expert, beyond any trained router.
MAX_MOE_LOAD_SKEW = 1e3
