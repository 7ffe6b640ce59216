// Example.cs - the README's example: stream a story token by token, stop on Ctrl+C, draft with n-grams.
//
//   mono Example.exe MODEL.gguf ["prompt"]
//
// Built by run_tests.sh next to Specula.dll; the test `example` runs Run() and checks its output.
using System;
using System.IO;
using System.Threading;
using Specula;

namespace SpeculaExample
{
    public static class Program
    {
        public static int Main(string[] args)
        {
            if (args.Length < 1)
            {
                Console.Error.WriteLine("usage: mono Example.exe MODEL.gguf [PROMPT]");
                return 2;
            }
            using (var cts = new CancellationTokenSource())
            {
                // Ctrl+C cancels the generation (specula_session_cancel from the signal thread), not the process.
                Console.CancelKeyPress += (sender, e) =>
                {
                    e.Cancel = true;
                    cts.Cancel();
                };
                try
                {
                    Run(args[0], args.Length > 1 ? args[1] : "Once upon a time", 200, Console.Out, cts.Token);
                }
                catch (SpeculaException e)
                {
                    Console.Error.WriteLine("error: " + e.Message + " [" + e.Status + "]");
                    return 1;
                }
            }
            return 0;
        }

        /// <summary>Greedy continuation of prompt, written to output as it is generated.</summary>
        public static StopReason Run(string modelPath, string prompt, int maxTokens, TextWriter output, CancellationToken ct)
        {
            using (Model model = Model.Load(modelPath))
            using (var session = new Session(model, new SessionOptions { NCtx = 512 }, SamplerOptions.Greedy()))
            {
                // Speculative decoding is exact: the same tokens as plain decoding, in fewer target passes.
                session.SetSpeculative(new SpeculativeOptions { Ngram = true });
                session.AppendText(prompt);  // adds BOS: the context is empty
                output.Write(prompt);
                StopReason stop = StopReason.None;
                foreach (TokenEvent ev in session.Generate(maxTokens, ct))
                {
                    output.Write(ev.Text);  // always complete UTF-8
                    stop = ev.Stop;         // None until the last event
                }
                Stats stats = session.GetStats();
                output.WriteLine();
                output.WriteLine(string.Format(System.Globalization.CultureInfo.InvariantCulture,
                                               "[{0}: {1} tokens, {2:F0} tokens/s, {3:F2} tokens per target pass]",
                                               Library.StopReasonString(stop), stats.NGenerated, stats.DecodeTokensPerS,
                                               stats.Tau));
                return stop;
            }
        }
    }
}
