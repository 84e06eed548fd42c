"""The audit's pure core: each schedule's definitions over time, read from the
changelog (`versions`), and the walk that judges every instant a window owed
(`walk`). The history's recorder and `kafkron audit` drive them on SQLite
(`actors.history`), the simulation's audit checker on its own topics."""
