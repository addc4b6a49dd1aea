/*

pynq-kv: one hash bank of the exact table (docs/rtl.md)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Simple dual-port RAM, one write port and one read port on the same clock,
 * written in the template Yosys and Vivado infer as block RAM (RAMB36E2 /
 * URAM when wide and deep enough).
 *
 * With RD_PORTS = 2 it is a true dual-port RAM: port A reads at rd_addr, as
 * with one port; port B writes at wr_addr when wr_en is high and otherwise
 * reads at rd1_addr (one address per port, so the tools see the two ports of
 * a URAM288 or RAMB36E2; Yosys 0.23 maps 8192 x 72 to two URAM288 with
 * ADDR_A = rd_addr and ADDR_B = the shared address, docs/rtl.md).  Port B
 * is "no change": in a write cycle rd1_data keeps its last value.  The
 * engine's LOOKUP_PORTS = 2 reads with port B only in cycles without a write.
 *
 * Read latency is RD_LAT clock cycles (1: registered read data; 2: one more
 * output register, the BRAM DOB register).  A read and a write of the same
 * address in the same cycle return the OLD data (read-first) in simulation;
 * the engine never relies on either collision behaviour: it forwards every
 * write still in flight (kv_engine forwarding window), so read-first,
 * write-first and "no change" RAMs all give the same results.
 *
 * In simulation the contents start at zero (an initial block, left out when
 * SYNTHESIS is defined, as Yosys and Vivado do) so that simulation never
 * reads X; FPGA block RAM and UltraRAM power up as zero, and the engine
 * clears its table with a sweep after reset anyway.
 */
module kv_bank_ram #
(
    // Word width in bits (valid + key + value for the engine): >= 1
    parameter WIDTH = 321,
    // Address width in bits, depth = 2^ADDR_W words: 1 to 24
    parameter ADDR_W = 10,
    // Read latency in clock cycles: 1 or 2 (both read ports)
    parameter RD_LAT = 1,
    // Read ports: 1 (rd_*; rd1_addr unused, rd1_data zero) or 2 (rd1_* shares
    // port B with the write)
    parameter RD_PORTS = 1
)
(
    input  wire              clk,

    input  wire              wr_en,
    input  wire [ADDR_W-1:0] wr_addr,
    input  wire [WIDTH-1:0]  wr_data,

    input  wire [ADDR_W-1:0] rd_addr,
    output wire [WIDTH-1:0]  rd_data,

    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [ADDR_W-1:0] rd1_addr,  // unused with RD_PORTS = 1
    /* verilator lint_on UNUSEDSIGNAL */
    output wire [WIDTH-1:0]  rd1_data
);

// check configuration
initial begin
    if (WIDTH < 1) begin
        $error("Error: WIDTH must be at least 1 (instance %m)");
        $finish;
    end
    if (ADDR_W < 1 || ADDR_W > 24) begin
        $error("Error: ADDR_W must be 1 to 24 (instance %m)");
        $finish;
    end
    if (RD_LAT != 1 && RD_LAT != 2) begin
        $error("Error: RD_LAT must be 1 or 2 (instance %m)");
        $finish;
    end
    if (RD_PORTS != 1 && RD_PORTS != 2) begin
        $error("Error: RD_PORTS must be 1 or 2 (instance %m)");
        $finish;
    end
end

reg [WIDTH-1:0] mem [0:(2**ADDR_W)-1];
reg [WIDTH-1:0] rd_data_reg;
reg [WIDTH-1:0] rd_data_pipe_reg;

`ifndef SYNTHESIS
// simulation only: synthesis tools (Yosys and Vivado define SYNTHESIS) would
// have to unroll this loop (Yosys 0.23 takes minutes for 8K words), and
// block RAM and UltraRAM power up as zero anyway
integer i;

initial begin
    for (i = 0; i < 2**ADDR_W; i = i + 1) begin
        mem[i] = {WIDTH{1'b0}};
    end
    rd_data_reg = {WIDTH{1'b0}};
    rd_data_pipe_reg = {WIDTH{1'b0}};
end
`endif

always @(posedge clk) begin
    rd_data_reg <= mem[rd_addr];
    rd_data_pipe_reg <= rd_data_reg;
end

assign rd_data = (RD_LAT == 2) ? rd_data_pipe_reg : rd_data_reg;

generate

if (RD_PORTS == 2) begin : g_tdp

    // port B: the write or the second read, one address
    wire [ADDR_W-1:0] b_addr = wr_en ? wr_addr : rd1_addr;
    reg  [WIDTH-1:0]  rd1_data_reg;
    reg  [WIDTH-1:0]  rd1_data_pipe_reg;

`ifndef SYNTHESIS
    initial begin
        rd1_data_reg = {WIDTH{1'b0}};
        rd1_data_pipe_reg = {WIDTH{1'b0}};
    end
`endif

    always @(posedge clk) begin
        if (wr_en) begin
            mem[b_addr] <= wr_data;
        end else begin
            rd1_data_reg <= mem[b_addr];
        end
        rd1_data_pipe_reg <= rd1_data_reg;
    end

    assign rd1_data = (RD_LAT == 2) ? rd1_data_pipe_reg : rd1_data_reg;

end else begin : g_sdp

    always @(posedge clk) begin
        if (wr_en) begin
            mem[wr_addr] <= wr_data;
        end
    end

    assign rd1_data = {WIDTH{1'b0}};

end

endgenerate

endmodule

`resetall
