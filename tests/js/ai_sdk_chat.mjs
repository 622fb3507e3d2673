// A chat route as the Vercel AI SDK writes one (`streamText` over UI messages, answered as a UI message stream),
// on node's own http server, with the SDK's mock language model in place of a provider: for tamesu's tests
// (tests/targets/test_ai_sdk_chat.py). The model's rules: a message naming an order (ORD-n) calls the
// lookup_order tool first; "break" fails the stream; otherwise it reasons a little, then answers with every user
// message it was sent and the tools whose results it was shown, so a test sees what the route received.
// GET /api/log: each request's UI messages, with the assistant's UI message as the SDK's own `readUIMessageStream`
// (what useChat keeps and sends back next) built it from the answer.
import { convertToModelMessages, readUIMessageStream, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV4, convertArrayToReadableStream } from 'ai/test';
import { z } from 'zod';
import { serveChatRoute } from './chat_route.mjs';

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
const finish = (unified) => ({ type: 'finish', finishReason: { unified, raw: undefined }, usage });
const textOf = (message) => message.content.filter((p) => p.type === 'text').map((p) => p.text).join('');

function answer(prompt) {
  const said = prompt.filter((m) => m.role === 'user').map(textOf);
  const last = prompt[prompt.length - 1];
  const order = last.role === 'user' ? /ORD-\d+/.exec(textOf(last)) : null;
  if (order) {
    return [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'lookup_order', input: JSON.stringify({ id: order[0] }) },
      finish('tool-calls')];
  }
  if (last.role === 'user' && textOf(last).includes('break')) {
    return null;
  }
  const tools = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content.map((p) => p.toolName));
  const reply = `heard so far: ${said.join(' | ')}` + (tools.length ? ` [tool results: ${tools.join(', ')}]` : '');
  return [
    { type: 'reasoning-start', id: 'r1' }, { type: 'reasoning-delta', id: 'r1', delta: 'the user wants a reply. ' },
    { type: 'reasoning-end', id: 'r1' },
    { type: 'text-start', id: 't1' }, { type: 'text-delta', id: 't1', delta: reply.slice(0, 10) },
    { type: 'text-delta', id: 't1', delta: reply.slice(10) }, { type: 'text-end', id: 't1' }, finish('stop'),
  ];
}

const model = new MockLanguageModelV4({
  doStream: async ({ prompt }) => {
    const parts = answer(prompt);
    if (parts === null) {
      throw new Error('the model is down');
    }
    return { stream: convertArrayToReadableStream(parts) };
  },
});

const tools = {
  lookup_order: tool({
    description: 'The status of an order',
    inputSchema: z.object({ id: z.string() }),
    execute: async ({ id }) => ({ id, status: 'shipped' }),
  }),
};

const log = [];
serveChatRoute(async (messages, response) => {
  const result = streamText({ model, tools, messages: await convertToModelMessages(messages), stopWhen: stepCountIs(3) });
  const entry = { received: messages, kept: null };
  log.push(entry);
  result.pipeUIMessageStreamToResponse(response);
  try {
    for await (const message of readUIMessageStream({ stream: result.toUIMessageStream() })) entry.kept = message;
  } catch (error) {
    entry.kept = { error: String(error) };
  }
}, log);
