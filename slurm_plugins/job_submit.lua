--[[
railgang job_submit.lua (Slurm 22.05+): validate railgang hints, tag ML jobs, hold them for the
railgang daemon while it is alive, and reject bad or untagged input with a message that says
what to change.

Hints reach this script in one of two ways:
  * the railgang SPANK plugin (`sbatch --rg-parallel=tp8,pp4,dp8 --rg-elastic=4:16 --rg-class=1`)
    puts RAILGANG_PARALLEL / RAILGANG_ELASTIC / RAILGANG_CLASS into spank_job_env;
  * without the plugin, `--comment="rg:parallel=tp8,pp4,dp8;elastic=4:16;class=1"`.
A valid ML job is tagged in admin_comment as "railgang:tp=8,pp=4,dp=8;elastic=4:16;class=1".

Fail open: the daemon writes the epoch time into RAILGANG_HEARTBEAT_FILE every cycle. Jobs are
held (priority 0) only while that time is younger than RAILGANG_HEARTBEAT_MAX_AGE seconds;
otherwise Slurm schedules them natively. This runs inside slurmctld with its locks held: no
network, only one small local file read.
]]

local HEARTBEAT_FILE = os.getenv("RAILGANG_HEARTBEAT_FILE")
local HEARTBEAT_MAX_AGE = tonumber(os.getenv("RAILGANG_HEARTBEAT_MAX_AGE") or "60") or 60

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
        local key, num = string.match(part, "^%s*(%a%a)(%d+)%s*$")
        if key == nil or shape[key] == nil then
            return nil, "--rg-parallel: '" .. part .. "' is not tpN, ppN or dpN (e.g. tp8,pp4,dp8)"
        end
        if seen[key] then return nil, "--rg-parallel: " .. key .. " given twice" end
        seen[key] = true
        num = tonumber(num)
        if num < 1 or num > 65536 then return nil, "--rg-parallel: " .. key .. " must be 1..65536" end
        shape[key] = num
    end
    if next(seen) == nil then return nil, "--rg-parallel is empty (e.g. tp8,pp4,dp8)" end
    return shape
end

-- "4:16" (DP replicas) -> 4, 16
local function parse_elastic(s)
    local lo, hi = string.match(s, "^%s*(%d+):(%d+)%s*$")
    if lo == nil then return nil, nil, "--rg-elastic: '" .. s .. "' is not MIN:MAX (e.g. 4:16)" end
    lo, hi = tonumber(lo), tonumber(hi)
    if lo < 1 or hi < lo then return nil, nil, "--rg-elastic: need 1 <= MIN <= MAX, got " .. s end
    return lo, hi
end

local function hints_from_comment(comment)
    if comment == nil or string.sub(comment, 1, 3) ~= "rg:" then return nil end
    local h = {}
    for item in string.gmatch(string.sub(comment, 4), "[^;]+") do
        local k, v = string.match(item, "^%s*(%a+)=(.-)%s*$")
        if k == nil then return nil, "--comment: '" .. item .. "' is not key=value" end
        if k ~= "parallel" and k ~= "elastic" and k ~= "class" then
            return nil, "--comment: unknown hint '" .. k .. "' (parallel, elastic, class)"
        end
        h[k] = v
    end
    return h
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

local function daemon_alive()
    if HEARTBEAT_FILE == nil then return false end
    local f = io.open(HEARTBEAT_FILE, "r")
    if f == nil then return false end
    local beat = tonumber(f:read("*l") or "")
    f:close()
    return beat ~= nil and (os.time() - beat) <= HEARTBEAT_MAX_AGE
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
    if hints.parallel == nil and hints.elastic == nil and hints.class == nil then
        return slurm.SUCCESS  -- not an ML job: Slurm schedules it as usual
    end

    local tag = {}
    if hints.parallel then
        local shape, perr = parse_parallel(hints.parallel)
        if perr then return reject(perr) end
        local want = shape.tp * shape.pp * shape.dp
        local gpus = requested_gpus(job_desc)
        if gpus ~= nil and gpus ~= want then
            return reject(string.format(
                "--rg-parallel tp%d,pp%d,dp%d needs %d GPUs but the job asks for %d; make them agree",
                shape.tp, shape.pp, shape.dp, want, gpus))
        end
        table.insert(tag, string.format("tp=%d,pp=%d,dp=%d", shape.tp, shape.pp, shape.dp))
    end
    if hints.elastic then
        local lo, hi, eerr = parse_elastic(hints.elastic)
        if eerr then return reject(eerr) end
        table.insert(tag, string.format("elastic=%d:%d", lo, hi))
    end
    local class = 3
    if hints.class then
        class = tonumber(hints.class)
        if class == nil or class < 0 or class > 3 or class ~= math.floor(class) then
            return reject("--rg-class must be 0 (serving), 1 (production), 2 (interactive) or 3 (batch)")
        end
    end
    table.insert(tag, string.format("class=%d", class))

    job_desc.admin_comment = "railgang:" .. table.concat(tag, ";")
    if daemon_alive() then
        job_desc.priority = 0  -- held: the daemon places and releases it
        slurm.log_user("%s", "railgang: job held for topology-aware placement by the railgang daemon")
    end
    return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    -- a held railgang job must not be released by its owner while the daemon is placing it
    if modify_uid ~= 0 and job_desc.priority ~= nil and job_desc.priority ~= slurm.NO_VAL
        and job_rec.admin_comment ~= nil and string.sub(job_rec.admin_comment, 1, 9) == "railgang:"
        and daemon_alive() then
        return reject("this job is placed by the railgang daemon; ask why it waits with `railgang explain JOBID`")
    end
    return slurm.SUCCESS
end

return slurm.SUCCESS
