// AssemblyInfo.cs - assembly identity of the binding.
using System.Reflection;
using System.Runtime.CompilerServices;

[assembly: AssemblyTitle("Specula")]
[assembly: AssemblyDescription("C# binding of libspecula (specula.h, ABI version 1)")]
[assembly: AssemblyVersion("0.8.0.0")]
// The test runner checks the P/Invoke layer itself (every function of specula.h, struct layouts against C).
[assembly: InternalsVisibleTo("SpeculaTests")]
