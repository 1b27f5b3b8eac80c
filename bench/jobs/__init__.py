"""Batch jobs on bodega against Redis queues (``queues``): bodega's pool, the Redis pools,
and the marks and CPU accounting they share."""
