--[[
railgang job_submit.lua (Slurm 22.05+): validate railgang hints, tag ML jobs, put them under a
begin-time lease for the railgang daemon while it is alive, and reject bad or untagged input with
a message that says what to change.

Hints reach this script in one of two ways:
  * the railgang SPANK plugin (`sbatch --rg-parallel=tp8,pp4,dp8 --rg-elastic=4:16 --rg-class=1
    --rg-needs=gpumem>=40G,nvlink`) puts RAILGANG_PARALLEL / RAILGANG_ELASTIC / RAILGANG_CLASS /
    RAILGANG_NEEDS into spank_job_env;
  * without the plugin, `--comment="rg:parallel=tp8,pp4,dp8;elastic=4:16;class=1;needs=nvlink"`.
A valid ML job is tagged in admin_comment as
"railgang:tp=8,pp=4,dp=8;elastic=4:16;class=1;needs=gpumem>=40G,nvlink" (needs in canonical form).

Needs, not SKUs (docs/needs.md): the same grammar as railgang.daemon.core.needs (a test holds the
two to the same answers). RAILGANG_FLEET_FILE, which the daemon rewrites from sinfo, lists each
kind of node once ("n[01-04] nodes=4 gpus=8 type=a100 gpumem=80 nvlink=1 net=ib cc=8.0"): a need
no node meets, or that too few GPUs meet for the job's size, is refused with what exists. Without
the file (no daemon yet) only the grammar is checked: fail open, the daemon reports the rest.

Fail open (a lease, not a hold): the daemon writes "EPOCH [LEASE_S]" into RAILGANG_HEARTBEAT_FILE
every cycle. While that EPOCH is younger than RAILGANG_HEARTBEAT_MAX_AGE seconds, a new ML job
gets begin_time = now + LEASE_S (the heartbeat's second field, else RAILGANG_LEASE_S, else 120):
it waits with Reason=BeginTime, the daemon extends the lease every cycle and ends it
(StartTime=now) when it places the job. If the daemon dies nobody extends the lease and Slurm
schedules the job natively once it expires -- no railgang process needs to be alive for that.
Classes are granted, not claimed: class 3 (batch) is anyone's; classes 0 (serving), 1
(production) and 2 (interactive) only for an account, user or QOS listed in
RAILGANG_GRANTS_FILE, which the daemon rewrites (atomically, only on change) from the grants an
admin made with `railgang quota grant` or the API. Its lines: `CLASS KIND SUBJECT` (KIND is
account, user or qos), `limit CLASS SECONDS` (a class's longest time limit: a job that asks for
none gets it, one that asks for more is refused) and `open CLASS` (anyone may use it). A missing
or unreadable file fails closed for privilege and open for scheduling: classes 0-2 are refused
with a message saying so, class 3 and non-ML jobs are untouched.
This runs inside slurmctld with its locks held: no network, only small local file reads.
]]

local HEARTBEAT_FILE = os.getenv("RAILGANG_HEARTBEAT_FILE")
local HEARTBEAT_MAX_AGE = tonumber(os.getenv("RAILGANG_HEARTBEAT_MAX_AGE") or "60") or 60
local DEFAULT_LEASE_S = tonumber(os.getenv("RAILGANG_LEASE_S") or "120") or 120
local MAX_LEASE_S = 86400  -- a corrupt heartbeat must not park jobs for longer than a day
local GRANTS_FILE = os.getenv("RAILGANG_GRANTS_FILE")
local CLASS_NAMES = { [0] = "serving", [1] = "production", [2] = "interactive", [3] = "batch" }
local KIND_NAMES = { account = "account", user = "user", qos = "QOS" }
local FLEET_FILE = os.getenv("RAILGANG_FLEET_FILE")
-- nodes in one base block of topology/block (the first BlockSizes value, e.g. 18 for NVL72
-- racks of 18 nodes); set: a whole-node gang with --rg-parallel gets --segment from its shape
-- where Slurm lets this script set it (26.05+: job_desc.segment_size), unset: never
local SEGMENT_BASE = tonumber(os.getenv("RAILGANG_SEGMENT_BASE") or "")
if SEGMENT_BASE ~= nil and (SEGMENT_BASE < 1 or SEGMENT_BASE > 65535 or SEGMENT_BASE % 1 ~= 0) then
    SEGMENT_BASE = nil
end
local NETWORKS = { eth = true, ib = true, roce = true }
local NEEDS_HELP = "type=A100/H100, gpumem>=40G, nvlink, net=ib/roce, cc>=8.0 (comma-separated)"
-- Everything below runs inside slurmctld with its locks held, on text any user writes. Lua
-- patterns backtrack (quadratic, or worse, on crafted input), so every user-written text is
-- measured (#s is O(1)) and refused when over-long *before* any pattern runs on it; the patterns
-- that do run are anchored and use no `.-`.
local MAX_HINTS_LEN = 512    -- a whole "rg:..." comment
local MAX_HINT_LEN = 256     -- one hint value (--rg-parallel, --rg-elastic, --rg-class, --rg-needs)
local MAX_TRES_LEN = 1024    -- one GPU request (--gpus, --gres, --gpus-per-*) of a hinted job
local MAX_FILE_BYTES = 1048576  -- the daemon's grants and fleet files; more is not a real file
local MAX_GANG = 65536       -- tp, pp, dp and elastic bounds: the daemon's tag reader's range
local MAX_BEGIN_AHEAD_S = 366 * 86400  -- a --begin further out than a year is taken as a year

-- uids that may move a railgang job's lease or set its priority: root, plus the users named in
-- RAILGANG_TRUSTED_USERS in slurmctld's environment (names or uids, comma-separated; default
-- "slurm,railgang": SlurmUser and the daemon's user of the documented deployment; add Slurm
-- operators who place jobs by hand). Names are looked up in /etc/passwd once, when the script
-- loads (slurmctld reloads it when it changes), never per request. docs/security.md
local function trusted_uids(text, passwd)
    local t = { [0] = true }
    local by_name = {}
    for line in string.gmatch(passwd or "", "[^\n]+") do
        local name, uid = string.match(line, "^([^:]+):[^:]*:(%d+):")
        if name ~= nil and #uid <= 10 then by_name[name] = tonumber(uid) end
    end
    for item in string.gmatch(text or "", "[^,%s]+") do
        if string.find(item, "^%d+$") and #item <= 10 then
            t[tonumber(item)] = true
        elseif by_name[item] ~= nil then
            t[by_name[item]] = true
        end
    end
    return t
end

local function read_passwd()
    local f = io.open("/etc/passwd", "r")
    if f == nil then return "" end
    local text = f:read(4 * 1048576) or ""
    f:close()
    return text
end
local TRUSTED = trusted_uids(os.getenv("RAILGANG_TRUSTED_USERS") or "slurm,railgang", read_passwd())

-- s without leading and trailing white space, in linear time ("^%s*(.-)%s*$" is quadratic)
local function trim(s)
    local first = string.find(s, "%S")
    if first == nil then return "" end
    local last = #s
    while last > first do
        local b = string.byte(s, last)
        if b ~= 32 and (b < 9 or b > 13) then break end
        last = last - 1
    end
    return string.sub(s, first, last)
end

-- a small decimal integer in lo..hi (at most 6 digits, so no float or overflow), else nil
local function small_int(s, lo, hi)
    if #s == 0 or #s > 6 or string.find(s, "^%d+$") == nil then return nil end
    local n = tonumber(s)
    if n < lo or n > hi then return nil end
    return n
end

local function reject(msg)
    slurm.log_user("%s", "railgang: " .. msg)
    return slurm.ERROR
end

local function spank_env(job_desc, name)
    local n = job_desc.spank_job_env_size or 0
    local prefix = name .. "="
    for i = 0, n - 1 do
        local kv = job_desc.spank_job_env[i]
        if kv ~= nil and string.sub(kv, 1, #prefix) == prefix then
            return string.sub(kv, #prefix + 1)
        end
    end
    return nil
end

-- "tp8,pp4,dp8" -> {tp=8, pp=4, dp=8}; returns nil, message on error
local function parse_parallel(s)
    local shape = { tp = 1, pp = 1, dp = 1 }
    local seen = {}
    for part in string.gmatch(s, "[^,]+") do
        part = trim(part)
        local key, digits = string.sub(part, 1, 2), string.sub(part, 3)
        if shape[key] == nil or string.find(digits, "^%d+$") == nil then
            return nil, "--rg-parallel: '" .. part .. "' is not tpN, ppN or dpN (e.g. tp8,pp4,dp8)"
        end
        if seen[key] then return nil, "--rg-parallel: " .. key .. " given twice" end
        seen[key] = true
        local num = small_int(digits, 1, MAX_GANG)
        if num == nil then return nil, "--rg-parallel: " .. key .. " must be 1..65536" end
        shape[key] = num
    end
    if next(seen) == nil then return nil, "--rg-parallel is empty (e.g. tp8,pp4,dp8)" end
    return shape
end

-- "4:16" (DP replicas) -> 4, 16
local function parse_elastic(s)
    local lo, hi = string.match(trim(s), "^(%d+):(%d+)$")
    if lo == nil then return nil, nil, "--rg-elastic: '" .. s .. "' is not MIN:MAX (e.g. 4:16)" end
    local lo_n, hi_n = small_int(lo, 1, MAX_GANG), small_int(hi, 1, MAX_GANG)
    if lo_n == nil or hi_n == nil or hi_n < lo_n then
        return nil, nil, "--rg-elastic: need 1 <= MIN <= MAX <= 65536 replicas, got " .. s
    end
    return lo_n, hi_n
end

local function hints_from_comment(comment)
    if comment == nil or string.sub(comment, 1, 3) ~= "rg:" then return nil end
    if #comment > MAX_HINTS_LEN then
        return nil, string.format("--comment: railgang hints are at most %d characters, this one "
            .. "has %d (use the --rg-* options, or shorten it)", MAX_HINTS_LEN, #comment)
    end
    local h = {}
    for item in string.gmatch(string.sub(comment, 4), "[^;]+") do
        local eq = string.find(item, "=", 1, true)
        local k = eq and trim(string.sub(item, 1, eq - 1))
        local v = eq and trim(string.sub(item, eq + 1))
        if k == nil or string.find(k, "^%a+$") == nil then
            return nil, "--comment: '" .. item .. "' is not key=value"
        end
        if k ~= "parallel" and k ~= "elastic" and k ~= "class" and k ~= "needs" and k ~= "serving" then
            return nil, "--comment: unknown hint '" .. k .. "' (parallel, elastic, class, needs, serving)"
        end
        h[k] = v
    end
    return h
end

-- "a//b" -> {"a", "", "b"}: empty pieces kept, so they can be refused
local function split(s, sep)
    local out, start = {}, 1
    while true do
        local i = string.find(s, sep, start, true)
        if i == nil then table.insert(out, string.sub(s, start)); return out end
        table.insert(out, string.sub(s, start, i - 1))
        start = i + 1
    end
end

local function sorted_keys(set)
    local out = {}
    for k in pairs(set) do table.insert(out, k) end
    table.sort(out)
    return out
end

local function name_set(value, item, kind, allowed)
    local set = {}
    for _, name in ipairs(split(value, "/")) do
        if name == "" or not string.match(name, "^[a-z0-9][a-z0-9_%.%-]*$") then
            return nil, string.format("'%s': '%s' is not a %s name (letters, digits, _ . -)", item, name, kind)
        end
        if allowed ~= nil and not allowed[name] then
            return nil, string.format("'%s': unknown interconnect '%s' (one of eth, ib, roce)", item, name)
        end
        set[name] = true
    end
    return set
end

-- "gpumem>=40G,nvlink" -> needs table and its canonical text; nil, message on error. The same
-- grammar and canonical text as railgang.daemon.core.needs.parse_needs / Needs.render.
local function parse_needs(text)
    local body = string.lower(string.gsub(text, "%s+", ""))
    local n = {}
    if body == "" then return n, "" end
    for _, item in ipairs(split(body, ",")) do
        local key, value, err
        if item == "" then
            return nil, string.format("an empty need in '%s' (two commas?); needs are %s",
                trim(text), NEEDS_HELP)
        elseif item == "nvlink" then
            key, value = "nvlink", true
        elseif string.sub(item, 1, 5) == "type=" then
            key = "types"
            value, err = name_set(string.sub(item, 6), item, "GPU type")
        elseif string.sub(item, 1, 4) == "net=" then
            key = "nets"
            value, err = name_set(string.sub(item, 5), item, "interconnect", NETWORKS)
        elseif string.sub(item, 1, 8) == "gpumem>=" then
            local num = string.sub(item, 9)
            if string.sub(num, -2) == "gb" then num = string.sub(num, 1, -3)
            elseif string.sub(num, -1) == "g" then num = string.sub(num, 1, -2) end
            local gb = (string.match(num, "^%d+$") or string.match(num, "^%d+%.%d+$")) and tonumber(num)
            if not gb or gb <= 0 or gb > 4096 then
                return nil, string.format("'%s': memory per GPU must be a number of GB in (0, 4096], "
                    .. "e.g. gpumem>=40G", item)
            end
            key, value = "mem", gb
        elseif string.sub(item, 1, 4) == "cc>=" then
            local cc = string.sub(item, 5)
            local major, minor = string.match(cc, "^(%d%d?)%.(%d)$")
            if major == nil then major, minor = string.match(cc, "^(%d%d?)$"), "0" end
            if major == nil or tonumber(major) < 1 then
                return nil, string.format("'%s': compute capability is MAJOR.MINOR, e.g. cc>=8.0", item)
            end
            key, value = "cc", { tonumber(major), tonumber(minor) }
        elseif item == "gpumem" or item == "cc" then
            return nil, string.format("'%s' needs a bound, e.g. %s (quote the option: a bare > is "
                .. "a shell redirect)", item, item == "cc" and "cc>=8.0" or "gpumem>=40G")
        else
            return nil, string.format("'%s' is not a need; needs are %s", item, NEEDS_HELP)
        end
        if err then return nil, err end
        if n[key] ~= nil then
            local what = string.match(item, "^[%a]+")
            return nil, string.format("'%s': %s is given twice", item, what)
        end
        n[key] = value
    end
    local parts = {}
    if n.types then table.insert(parts, "type=" .. table.concat(sorted_keys(n.types), "/")) end
    if n.mem then table.insert(parts, string.format("gpumem>=%gG", n.mem)) end
    if n.nvlink then table.insert(parts, "nvlink") end
    if n.nets then table.insert(parts, "net=" .. table.concat(sorted_keys(n.nets), "/")) end
    if n.cc then table.insert(parts, string.format("cc>=%d.%d", n.cc[1], n.cc[2])) end
    return n, table.concat(parts, ",")
end

-- The fleet file, cached by its text like the grants; nil when not configured or unreadable.
local fleet_text, fleet = nil, nil

local function parse_fleet(text)
    local kinds = {}
    for line in string.gmatch(text, "[^\n]+") do
        local hosts, rest = string.match(line, "^%s*([^#%s]%S*)%s+(.*)$")
        if hosts ~= nil then
            local k = { hosts = hosts }
            for key, v in string.gmatch(rest, "(%w+)=(%S+)") do k[key] = v end
            local major, minor = string.match(k.cc or "", "^(%d+)%.(%d+)$")
            table.insert(kinds, {
                hosts = hosts, nodes = tonumber(k.nodes) or 0, gpus = tonumber(k.gpus) or 0,
                type = k.type or "-", mem = tonumber(k.gpumem) or 0, nvlink = k.nvlink == "1",
                net = k.net or "-", cc = major and { tonumber(major), tonumber(minor) } or nil,
            })
        end
    end
    return kinds
end

-- a small local file's text, or nil when missing, unreadable or larger than MAX_FILE_BYTES
local function read_small(path)
    local f = io.open(path, "r")
    if f == nil then return nil end
    local text = f:read(MAX_FILE_BYTES + 1)
    f:close()
    if text ~= nil and #text > MAX_FILE_BYTES then
        slurm.log_info("%s", "railgang: " .. path .. " is larger than " .. MAX_FILE_BYTES
            .. " bytes; ignored")
        return nil
    end
    return text or ""
end

local function current_fleet()
    if FLEET_FILE == nil or FLEET_FILE == "" then return nil end
    local text = read_small(FLEET_FILE)
    if text == nil then return nil end
    if text ~= fleet_text then fleet, fleet_text = parse_fleet(text), text end
    return fleet
end

local function kind_meets(n, k)
    if n.types and not n.types[k.type] then return false end
    if n.mem and k.mem < n.mem then return false end
    if n.nvlink and not k.nvlink then return false end
    if n.nets and not n.nets[k.net] then return false end
    if n.cc and (k.cc == nil or k.cc[1] < n.cc[1] or (k.cc[1] == n.cc[1] and k.cc[2] < n.cc[2])) then
        return false
    end
    return true
end

local function describe_kind(k)
    local parts = { k.type == "-" and "untyped" or k.type,
                    k.mem > 0 and string.format("%gG", k.mem) or "mem?" }
    if k.nvlink then table.insert(parts, "nvlink") end
    if k.net ~= "-" then table.insert(parts, k.net) end
    if k.cc then table.insert(parts, string.format("cc%d.%d", k.cc[1], k.cc[2])) end
    return string.format("%s (%d x %d GPUs %s)", k.hosts, k.nodes, k.gpus, table.concat(parts, " "))
end

-- nil, exclude when some nodes meet the needs (enough GPUs of them for `gpus`, when known),
-- else why not; exclude lists the hosts that do not meet them (nil when all do)
local function check_needs_fleet(n, text, gpus)
    local kinds = current_fleet()
    if kinds == nil or #kinds == 0 then return nil end  -- fail open: the daemon says the rest
    local have, exclude = 0, {}
    for _, k in ipairs(kinds) do
        if kind_meets(n, k) then
            have = have + k.nodes * k.gpus
        else
            table.insert(exclude, k.hosts)
        end
    end
    local all = {}  -- what exists, spelled out only for a refusal
    if have == 0 or (gpus ~= nil and gpus > have) then
        for _, k in ipairs(kinds) do table.insert(all, describe_kind(k)) end
    end
    if have == 0 then
        return string.format("--rg-needs=%s: no node meets it; the cluster has %s", text,
            table.concat(all, "; "))
    end
    if gpus ~= nil and gpus > have then
        return string.format("--rg-needs=%s: only %d GPUs meet it, the job asks for %d; the "
            .. "cluster has %s", text, have, gpus, table.concat(all, "; "))
    end
    return nil, #exclude > 0 and table.concat(exclude, ",") or nil
end

-- the job's GPU requests: --gpus, --gres/--gpus-per-node, --gpus-per-task, --gpus-per-socket
local TRES_FIELDS = { "tres_per_job", "tres_per_node", "tres_per_task", "tres_per_socket" }

-- a refusal when a GPU request is too long to read (checked before any pattern looks at it,
-- as the Comment is), else nil
local function tres_too_long(job_desc)
    for _, key in ipairs(TRES_FIELDS) do
        local v = job_desc[key]
        if type(v) == "string" and #v > MAX_TRES_LEN then
            return string.format("a railgang job's GPU request (%s) is at most %d characters, "
                .. "this one has %d", key, MAX_TRES_LEN, #v)
        end
    end
    return nil
end

-- true when any GPU request names a GPU (a plain find: no pattern)
local function asks_gpus(job_desc)
    for _, key in ipairs(TRES_FIELDS) do
        local v = job_desc[key]
        if type(v) == "string" and string.find(v, "gpu", 1, true) then return true end
    end
    return false
end

-- total GPUs the job asks for, from --gpus (tres_per_job) or --gres/--gpus-per-node x nodes
local function requested_gpus(job_desc)
    local function count(tres)
        if tres == nil then return nil end
        local n = string.match(tres, "gpu:(%d+)$") or string.match(tres, "gpu:[%w_-]+:(%d+)$")
        return tonumber(n)
    end
    local per_job = count(job_desc.tres_per_job)
    if per_job then return per_job end
    local per_node = count(job_desc.tres_per_node)
    if per_node then
        local nodes = job_desc.min_nodes
        if nodes == nil or nodes == slurm.NO_VAL or nodes == 0 then nodes = 1 end
        return per_node * nodes
    end
    return nil
end

-- --segment from the parallel shape (benchmarks/baselines/slurm_block.py segment_size: a test holds the two
-- to the same answers): the nodes of one TP x PP replica, so that Slurm's own block placement
-- (no daemon, or after its lease lapsed) keeps each replica's pipeline inside one block. Only
-- for whole-node gangs whose replica is whole nodes, fits a base block, is not the whole job and
-- divides it (Slurm refuses the others); a --segment of the user's own is kept.
local function shape_segment(job_desc, shape)
    if SEGMENT_BASE == nil then return nil end
    local asked = job_desc.segment_size
    if asked == nil then return nil end  -- Slurm before 26.05: no such field for this script
    if asked ~= 0 and asked ~= 65534 and asked ~= slurm.NO_VAL then return nil end
    local nodes = job_desc.min_nodes
    if nodes == nil or nodes == slurm.NO_VAL or nodes < 2 then return nil end
    local gpus = requested_gpus(job_desc)
    if gpus == nil or gpus % nodes ~= 0 then return nil end
    local per_node = math.floor(gpus / nodes)
    local replica_gpus = shape.tp * shape.pp
    if per_node == 0 or replica_gpus % per_node ~= 0 then return nil end
    local replica = math.floor(replica_gpus / per_node)
    if replica < 1 or replica > SEGMENT_BASE or replica >= nodes or nodes % replica ~= 0 then return nil end
    return replica
end

-- The heartbeat file's first line is "EPOCH [LEASE_S]". Returns the lease length in seconds
-- while the daemon is alive, nil when it is not (missing, unreadable, stale or garbled file).
local function daemon_lease()
    if HEARTBEAT_FILE == nil then return nil end
    local f = io.open(HEARTBEAT_FILE, "r")
    if f == nil then return nil end
    local line = f:read("*l") or ""
    f:close()
    local beat, lease = string.match(line, "^%s*(%d+)%s*(%d*)%s*$")
    beat = tonumber(beat)
    if beat == nil or (os.time() - beat) > HEARTBEAT_MAX_AGE then return nil end
    lease = tonumber(lease) or DEFAULT_LEASE_S
    if lease < 1 then return nil end
    return math.min(lease, MAX_LEASE_S)
end

-- Parsed grants, kept between submissions (slurmctld keeps one Lua state until the script
-- changes). Lua 5.1 has no stat(), so the cache key is the file's text itself: one read of a
-- small file and a string compare per submission, a parse only when the daemon rewrote it (a
-- content key also sees two rewrites within one second, which a 1 s mtime would not).
local grants_text, grants = nil, nil

local function parse_grants(text)
    local g = { allow = {}, limit = {}, open = { [3] = true } }
    local n = 0
    for line in string.gmatch(text, "[^\n]+") do
        n = n + 1
        local class, kind, subject = string.match(line, "^%s*([0-3])%s+(%a+)%s+(%S+)%s*$")
        local lclass, secs = string.match(line, "^%s*limit%s+([0-3])%s+(%d+)%s*$")
        local oclass = string.match(line, "^%s*open%s+([0-3])%s*$")
        if class ~= nil and KIND_NAMES[kind] ~= nil then
            g.allow[class .. " " .. kind .. " " .. subject] = true
        elseif lclass ~= nil and tonumber(secs) > 0 then
            g.limit[tonumber(lclass)] = tonumber(secs)
        elseif oclass ~= nil then
            g.open[tonumber(oclass)] = true
        elseif not string.match(line, "^%s*#") and not string.match(line, "^%s*$") then
            slurm.log_info("%s", string.format("railgang: %s line %d skipped (not `CLASS KIND "
                .. "SUBJECT`, `limit CLASS SECONDS` or `open CLASS`): %s", GRANTS_FILE, n, line))
        end
    end
    return g
end

-- The grants now, or nil when the file is not configured, missing or unreadable.
local function current_grants()
    if GRANTS_FILE == nil or GRANTS_FILE == "" then return nil end
    local text = read_small(GRANTS_FILE)
    if text == nil then return nil end
    if text ~= grants_text then
        grants, grants_text = parse_grants(text), text
    end
    return grants
end

-- nil when the job may use its class (time limit applied), else the refusal message
local function check_class(job_desc, class)
    if class == 3 then return nil end
    local name = string.format("--rg-class=%d (%s)", class, CLASS_NAMES[class])
    local g = current_grants()
    if g == nil then
        return string.format("%s cannot be checked: the class grants file %s is missing or "
            .. "unreadable, so only class 3 (batch) is accepted now; the railgang daemon writes it "
            .. "every cycle (or an admin: `railgang quota grants-file`)", name, tostring(GRANTS_FILE))
    end
    local who = { { "account", job_desc.account }, { "user", job_desc.user_name },
                  { "qos", job_desc.qos } }
    local granted = g.open[class] == true
    local named = {}
    for _, w in ipairs(who) do
        local kind, subject = w[1], w[2]
        if subject ~= nil and subject ~= "" then
            table.insert(named, KIND_NAMES[kind] .. " " .. subject)
            if g.allow[class .. " " .. kind .. " " .. subject] then granted = true end
        end
    end
    if not granted then
        return string.format("%s is not granted to %s; ask a railgang admin: `railgang quota grant "
            .. "%d account %s` (or user/qos; API: POST /v1/classes/%d/grants), or submit as "
            .. "--rg-class=3 (batch)", name, table.concat(named, ", "), class,
            tostring(job_desc.account), class)
    end
    local limit_s = g.limit[class]
    if limit_s ~= nil then
        local limit_min = math.ceil(limit_s / 60)
        local asked = job_desc.time_limit
        if asked == nil or asked == slurm.NO_VAL then
            job_desc.time_limit = limit_min
            slurm.log_user("%s", string.format("railgang: %s jobs end after %d min (time limit set)",
                name, limit_min))
        elseif asked > limit_min then
            return string.format("%s allows at most --time=%d (minutes), the job asks for %s; ask "
                .. "for less, or use class 1 or 3 for long work", name, limit_min,
                asked == slurm.INFINITE and "no limit" or tostring(asked))
        end
    end
    return nil
end

local function is_set(v)
    return v ~= nil and v ~= 0 and v ~= slurm.NO_VAL
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    -- R-Q4 "no tag, no schedule"
    if job_desc.account == nil or job_desc.account == "" then
        return reject("no account given; add --account=<your team> (list yours with `sacctmgr show assoc user=$USER`)")
    end

    local hints, err = hints_from_comment(job_desc.comment)
    if err then return reject(err) end
    hints = hints or {}
    hints.parallel = spank_env(job_desc, "RAILGANG_PARALLEL") or hints.parallel
    hints.elastic = spank_env(job_desc, "RAILGANG_ELASTIC") or hints.elastic
    hints.class = spank_env(job_desc, "RAILGANG_CLASS") or hints.class
    hints.needs = spank_env(job_desc, "RAILGANG_NEEDS") or hints.needs
    if hints.parallel == nil and hints.elastic == nil and hints.class == nil and hints.needs == nil then
        return slurm.SUCCESS  -- not an ML job: Slurm schedules it as usual
    end
    for _, key in ipairs({ "parallel", "elastic", "class", "needs", "serving" }) do
        if hints[key] ~= nil and #hints[key] > MAX_HINT_LEN then
            return reject(string.format("--rg-%s is at most %d characters, this one has %d",
                key, MAX_HINT_LEN, #hints[key]))
        end
    end

    local too_long = tres_too_long(job_desc)
    if too_long then return reject(too_long) end

    local tag = {}
    if hints.parallel then
        local shape, perr = parse_parallel(hints.parallel)
        if perr then return reject(perr) end
        local want = shape.tp * shape.pp * shape.dp
        if not asks_gpus(job_desc) then
            -- the daemon would count tp x pp x dp GPUs that Slurm never gives the job (and
            -- skips such a job: slurm/cli/snapshot.py), so it is refused here with the fix
            return reject(string.format("--rg-parallel tp%d,pp%d,dp%d needs %d GPUs but the job "
                .. "asks for none; add --gpus=%d (or --gres=gpu:N per node)",
                shape.tp, shape.pp, shape.dp, want, want))
        end
        local gpus = requested_gpus(job_desc)
        if gpus ~= nil and gpus ~= want then
            return reject(string.format(
                "--rg-parallel tp%d,pp%d,dp%d needs %d GPUs but the job asks for %d; make them agree",
                shape.tp, shape.pp, shape.dp, want, gpus))
        end
        table.insert(tag, string.format("tp=%d,pp=%d,dp=%d", shape.tp, shape.pp, shape.dp))
        local segment = shape_segment(job_desc, shape)
        if segment ~= nil then
            job_desc.segment_size = segment
            slurm.log_user("%s", string.format("railgang: --segment=%d (one tp%d x pp%d replica per "
                .. "topology block, for when Slurm places the job itself)", segment, shape.tp, shape.pp))
        end
    end
    if hints.elastic then
        local lo, hi, eerr = parse_elastic(hints.elastic)
        if eerr then return reject(eerr) end
        if not asks_gpus(job_desc) then
            return reject("--rg-elastic counts GPU replicas but the job asks for no GPUs; add "
                .. "--gpus=N (or --gres=gpu:N per node)")
        end
        table.insert(tag, string.format("elastic=%d:%d", lo, hi))
    end
    local class = 3
    if hints.class then
        class = small_int(trim(hints.class), 0, 3)
        if class == nil then
            return reject("--rg-class must be 0 (serving), 1 (production), 2 (interactive) or 3 (batch)")
        end
    end
    local denied = check_class(job_desc, class)
    if denied then return reject(denied) end
    table.insert(tag, string.format("class=%d", class))
    if hints.serving then
        -- a replica of a serving deployment (docs/serving.md): the daemon starts it ahead of the
        -- forecast ramp on the deployment's pool; only serving (class 0) work is a replica
        local name = trim(hints.serving)
        if class ~= 0 or not string.match(name, "^[%w][%w_%.%-]*$") or #name > 64 then
            return reject("--comment serving=NAME: a replica needs class=0 and a deployment name "
                .. "of letters, digits, _ . - (at most 64), got '" .. hints.serving .. "'")
        end
        table.insert(tag, "serving=" .. name)
    end
    if hints.needs then
        local needs, text = parse_needs(hints.needs)
        if needs == nil then return reject("--rg-needs: " .. text) end
        local unmet, exclude = check_needs_fleet(needs, text, requested_gpus(job_desc))
        if unmet then return reject(unmet) end
        if exclude then
            -- plain Slurm must honour the needs too (no daemon, or after its lease lapsed): the
            -- nodes that do not meet them are excluded, beside any --exclude of the user's own
            local own = job_desc.exc_nodes
            job_desc.exc_nodes = (own ~= nil and own ~= "") and (own .. "," .. exclude) or exclude
        end
        if text ~= "" then table.insert(tag, "needs=" .. text) end
    end

    local now = os.time()
    if is_set(job_desc.begin_time) and job_desc.begin_time ~= slurm.INFINITE
        and job_desc.begin_time > now then
        -- the user's own --begin, kept in the tag: the daemon neither starts the job before it
        -- nor pulls its begin time forward when it renews the lease
        table.insert(tag, string.format("begin=%d", math.min(job_desc.begin_time, now + MAX_BEGIN_AHEAD_S)))
    end
    job_desc.admin_comment = "railgang:" .. table.concat(tag, ";")
    local lease = daemon_lease()
    if lease ~= nil then
        local until_t = now + lease
        -- a later --begin of the user's own is kept: the lease only ever delays
        if not is_set(job_desc.begin_time) or job_desc.begin_time < until_t then
            job_desc.begin_time = until_t
        end
        slurm.log_user("%s", string.format(
            "railgang: job waits for topology-aware placement by the railgang daemon "
            .. "(lease %ds; if the daemon stops, Slurm schedules it when the lease ends); "
            .. "ask why it waits with `railgang explain JOBID`", lease))
    end
    return slurm.SUCCESS
end

-- the class in a railgang AdminComment ("...;class=N;..."), or nil
local function tagged_class(admin_comment)
    if admin_comment == nil or string.sub(admin_comment, 1, 9) ~= "railgang:"
        or #admin_comment > 4 * MAX_HINTS_LEN then
        return nil
    end
    local c = string.match(admin_comment, ";class=(%d)") or string.match(admin_comment, "^railgang:class=(%d)")
    return tonumber(c)
end

local function refuse_modify(job_rec, modify_uid, what)
    -- 22.05 discards log_user in job_modify (scontrol shows "Access/permission denied"); the
    -- submit message already points the owner at `railgang explain JOBID`
    slurm.log_info("%s", "railgang: refused uid " .. tostring(modify_uid) .. " " .. what
        .. " of job " .. tostring(job_rec.job_id) .. "; see `railgang explain`")
    return slurm.ESLURM_ACCESS_DENIED or slurm.ERROR
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    local class = tagged_class(job_rec.admin_comment)
    if class == nil then return slurm.SUCCESS end  -- not a railgang job
    -- A class is granted to an account, user or QOS: moving a class 0-2 job to another account
    -- or QOS re-checks the grant (for everyone: the daemon re-checks queued jobs every cycle too).
    local new_account = job_desc.account ~= nil and job_desc.account ~= "" and job_desc.account ~= job_rec.account
    local new_qos = job_desc.qos ~= nil and job_desc.qos ~= ""
    if class < 3 and (new_account or new_qos) then
        local who = { account = new_account and job_desc.account or job_rec.account,
                      user_name = job_rec.user_name, qos = new_qos and job_desc.qos or nil,
                      time_limit = job_rec.time_limit }
        if check_class(who, class) ~= nil then
            return refuse_modify(job_rec, modify_uid, "moving a class-" .. class .. " job to an "
                .. "account or QOS without that class's grant")
        end
    end
    -- While the daemon holds a railgang job's lease, only trusted uids (root, SlurmUser, the
    -- daemon's user, operators: RAILGANG_TRUSTED_USERS) may end the lease early (StartTime) or set
    -- its priority: the daemon decides when and where it starts. The owner may still hold and
    -- release it (priority 0 and INFINITE: `scontrol hold/release`), and edit its other fields.
    if TRUSTED[modify_uid] or daemon_lease() == nil then return slurm.SUCCESS end
    if is_set(job_desc.begin_time) then
        return refuse_modify(job_rec, modify_uid, "moving the lease")
    end
    local p = job_desc.priority
    if p ~= nil and p ~= slurm.NO_VAL and p ~= 0 and p ~= slurm.INFINITE then
        return refuse_modify(job_rec, modify_uid, "setting the priority")
    end
    return slurm.SUCCESS
end

return slurm.SUCCESS
