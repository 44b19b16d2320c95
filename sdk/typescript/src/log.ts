// Logs as JSON, one object a line on stderr (time, level, logger, message and the
// task's fields), like `tickwheel --log-format json`.

export type Level = "debug" | "info" | "warning" | "error";
const ORDER: Record<Level, number> = { debug: 10, info: 20, warning: 30, error: 40 };

export interface Logger {
  log(level: Level, message: string, fields?: Record<string, unknown>): void;
}

/** A logger that writes JSON lines to `write` (default: stderr) at `level` and above. */
export function jsonLogger(
  level: Level = (process.env.TICKWHEEL_LOG_LEVEL as Level | undefined) ?? "info",
  write: (line: string) => void = (line) => process.stderr.write(line),
  logger = "tickwheel.worker",
): Logger {
  const min = ORDER[level] ?? ORDER.info;
  return {
    log(lvl, message, fields) {
      if (ORDER[lvl] < min) return;
      write(`${JSON.stringify({ time: new Date().toISOString(), level: lvl.toUpperCase(), logger, message, ...fields })}\n`);
    },
  };
}

/** A logger that drops everything. */
export const silentLogger: Logger = { log() {} };
