/*
 * railgang SPANK plugin: adds --rg-parallel, --rg-elastic, --rg-class and --rg-needs to
 * sbatch/srun/salloc and hands their values to job_submit.lua through the job's spank environment
 * (RAILGANG_PARALLEL, RAILGANG_ELASTIC, RAILGANG_CLASS, RAILGANG_NEEDS; docs/needs.md). Validation lives in job_submit.lua,
 * where the message reaches the user and where the whole job is visible.
 *
 * Build: gcc -shared -fPIC -o railgang_spank.so railgang_spank.c  (needs libslurm-dev)
 */
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(railgang, 1);

#define OPT_PARALLEL 1
#define OPT_ELASTIC 2
#define OPT_CLASS 3
#define OPT_NEEDS 4

static char *parallel_val = NULL;
static char *elastic_val = NULL;
static char *class_val = NULL;
static char *needs_val = NULL;

static int take(int val, const char *optarg, int remote)
{
    (void)remote;
    if (optarg == NULL || optarg[0] == '\0')
        return -1;
    switch (val) {
    case OPT_PARALLEL: parallel_val = strdup(optarg); break;
    case OPT_ELASTIC: elastic_val = strdup(optarg); break;
    case OPT_CLASS: class_val = strdup(optarg); break;
    case OPT_NEEDS: needs_val = strdup(optarg); break;
    default: return -1;
    }
    return 0;
}

static struct spank_option options[] = {
    {"rg-parallel", "tpN,ppN,dpN", "railgang: parallelism shape, e.g. tp8,pp4,dp8", 1,
     OPT_PARALLEL, take},
    {"rg-elastic", "MIN:MAX", "railgang: elastic range in data-parallel replicas, e.g. 4:16", 1,
     OPT_ELASTIC, take},
    {"rg-class", "0-3", "railgang: priority class 0 serving, 1 production, 2 interactive, 3 batch",
     1, OPT_CLASS, take},
    {"rg-needs", "NEED,...", "railgang: what every node must offer, e.g. gpumem>=40G,nvlink "
     "(type=A/B, gpumem>=NG, nvlink, net=ib/roce/eth, cc>=X.Y)", 1, OPT_NEEDS, take},
    SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)ac; (void)av;
    /* a static spank_options[] table is ignored by sbatch: register explicitly */
    for (struct spank_option *o = options; o->name != NULL; o++) {
        if (spank_option_register(sp, o) != ESPANK_SUCCESS)
            return -1;
    }
    return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac; (void)av;
    if (spank_context() != S_CTX_LOCAL && spank_context() != S_CTX_ALLOCATOR)
        return 0;
    if (parallel_val) spank_job_control_setenv(sp, "RAILGANG_PARALLEL", parallel_val, 1);
    if (elastic_val) spank_job_control_setenv(sp, "RAILGANG_ELASTIC", elastic_val, 1);
    if (class_val) spank_job_control_setenv(sp, "RAILGANG_CLASS", class_val, 1);
    if (needs_val) spank_job_control_setenv(sp, "RAILGANG_NEEDS", needs_val, 1);
    return 0;
}
