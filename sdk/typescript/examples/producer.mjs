// A five-line producer: submit a task and wait for its result.
import { Client } from "tickwheel";
const client = new Client({ target: process.env.TICKWHEEL_TARGET ?? "127.0.0.1:50051", apiKey: process.env.TICKWHEEL_API_KEY });
const task = await client.submit("greet", { name: "Ada" });
console.log(JSON.stringify(await client.result(task.id, 60)));
