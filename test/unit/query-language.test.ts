import { describe, expect, it } from 'vitest';
import { parseQuery, QueryLanguageError } from '../../query/query-language.js';

const error = (q: string) => {
  try {
    parseQuery(q);
  } catch (err) {
    expect(err).toBeInstanceOf(QueryLanguageError);
    return (err as QueryLanguageError).detail;
  }
  throw new Error(`expected ${q} to be refused`);
};

describe('query language', () => {
  it('parses every key', () => {
    expect(
      parseQuery(
        'service:checkout environment:prod method:post endpoint:/orders/* status:failed,unknown trace:abc issue:iss_1 duration:>=250 duration:<1000',
      ),
    ).toEqual({
      service: 'checkout',
      environment: 'prod',
      method: 'POST',
      endpoint: '/orders/*',
      status: ['failed', 'unknown'],
      traceId: 'abc',
      issueId: 'iss_1',
      duration: [
        { op: '>=', ms: 250 },
        { op: '<', ms: 1000 },
      ],
      context: [],
    });
    expect(parseQuery('')).toEqual({ duration: [], context: [] });
    expect(parseQuery('   service:a   ')).toMatchObject({ service: 'a' });
  });

  it('types context values and ORs a repeated key', () => {
    expect(
      parseQuery(
        'context:customer.tier="gold" context:cart.items=3 context:flags.beta=true context:cart.items=4.5 context:a=bare',
      ).context,
    ).toEqual([
      { path: 'customer.tier', values: ['gold'] },
      { path: 'cart.items', values: [3, 4.5] },
      { path: 'flags.beta', values: [true] },
      { path: 'a', values: ['bare'] },
    ]);
    expect(parseQuery('context:n="3"').context[0]!.values).toEqual(['3']);
    expect(parseQuery('context:b="true"').context[0]!.values).toEqual(['true']);
  });

  it('quotes hold spaces, and \\" escapes a quote', () => {
    expect(parseQuery('endpoint:"/a b" context:note="say \\"hi\\" now"')).toMatchObject({
      endpoint: '/a b',
      context: [{ path: 'note', values: ['say "hi" now'] }],
    });
  });

  it('refuses what does not parse, with the term and its offset', () => {
    expect(error('service:a bogus:1')).toMatchObject({ path: 'q', term: 'bogus:1', offset: 10 });
    expect(error('service:a  nocolon')).toMatchObject({ term: 'nocolon', offset: 11 });
    expect(error('endpoint:"/open')).toMatchObject({ message: 'unterminated quote', offset: 0 });
    expect(error('duration:~5')).toMatchObject({ term: 'duration:~5' });
    expect(error('x:1 status:broken')).toMatchObject({ offset: 0 });
    expect(error('status:broken')).toMatchObject({ term: 'status:broken' });
    expect(error('service:a service:b')).toMatchObject({ offset: 10, message: 'service is given twice' });
    expect(error('context:bad..path=1')).toMatchObject({ term: 'context:bad..path=1' });
    expect(error('context:a=')).toMatchObject({ term: 'context:a=' });
    expect(error('context:a=x"y"')).toMatchObject({ message: 'a quote must enclose the whole value' });
    expect(error('service:')).toMatchObject({ term: 'service:' });
  });
});
