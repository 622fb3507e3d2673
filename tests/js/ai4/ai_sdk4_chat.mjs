// A chat route as the Vercel AI SDK 4 writes one (`streamText` over {role, content} messages, answered with the
// data stream protocol), on node's own http server, with the SDK's mock language model in place of a provider:
// for tamesu's tests (tests/targets/test_ai_sdk_chat.py). The model's rules: a message naming an order (ORD-n)
// reasons, then calls the lookup_order tool; "break" fails the stream; otherwise it answers with every user
// message it was sent.
import { jsonSchema, streamText, tool } from 'ai';
import { MockLanguageModelV1, convertArrayToReadableStream } from 'ai/test';
import { serveChatRoute } from '../chat_route.mjs';

const usage = { promptTokens: 1, completionTokens: 1 };
const textOf = (message) => (typeof message.content === 'string' ? message.content
  : message.content.filter((p) => p.type === 'text').map((p) => p.text).join(''));

function answer(prompt) {
  const said = prompt.filter((m) => m.role === 'user').map(textOf);
  const last = prompt[prompt.length - 1];
  const order = last.role === 'user' ? /ORD-\d+/.exec(textOf(last)) : null;
  if (order) {
    return [{ type: 'reasoning', textDelta: 'the user asks about an order. ' },
      { type: 'tool-call', toolCallType: 'function', toolCallId: 'call-1', toolName: 'lookup_order',
        args: JSON.stringify({ id: order[0] }) },
      { type: 'finish', finishReason: 'tool-calls', usage }];
  }
  if (last.role === 'user' && textOf(last).includes('break')) {
    return null;
  }
  const reply = `heard so far: ${said.join(' | ')}`;
  return [{ type: 'text-delta', textDelta: reply.slice(0, 10) }, { type: 'text-delta', textDelta: reply.slice(10) },
    { type: 'finish', finishReason: 'stop', usage }];
}

const model = new MockLanguageModelV1({
  doStream: async ({ prompt }) => {
    const parts = answer(prompt);
    if (parts === null) {
      throw new Error('the model is down');
    }
    return { stream: convertArrayToReadableStream(parts), rawCall: { rawPrompt: null, rawSettings: {} } };
  },
});

const tools = {
  lookup_order: tool({
    description: 'The status of an order',
    parameters: jsonSchema({ type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }),
    execute: async ({ id }) => ({ id, status: 'shipped' }),
  }),
};

serveChatRoute(async (messages, response) => {
  const result = streamText({ model, tools, messages, maxSteps: 3 });
  result.pipeDataStreamToResponse(response, { sendReasoning: true });
});
