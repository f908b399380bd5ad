#include "CSparkThreadLocal.h"

__thread void *_Nullable spark_observation_context = 0;
