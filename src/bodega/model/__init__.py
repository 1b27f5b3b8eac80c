"""Pure shared types: ids, machine config, states, capacity, events, errors."""
